// The encoder: deferred binding, batch-wide placement under the aliasing rule,
// and release of memory behind submitted work.
#include "memkit/arrays/encoder.hpp"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "arrays/handle_pool.hpp"
#include "memkit/errors.hpp"

namespace memkit::arrays {

namespace {

// Every use of one handle in the batch, in dispatch order.
struct handle_uses {
  std::vector<std::uint32_t> dispatches;
  std::uint32_t last = 0;
};

}  // namespace

encoder::encoder(context& target, submit_function submit, encoder_options options)
    : context_(target), submit_(std::move(submit)), options_(std::move(options)) {}

encoder::~encoder() {
  if (pending_.empty()) return;
  try {
    submit();
  } catch (...) {
    // Nothing ran: drop the pins so the memory is not leaked.
    detail::context_state& state = context_.get_state();
    {
      std::lock_guard lock(state.mutex);
      state.open_batches--;
    }
    for (pending_dispatch& d : pending_) {
      for (pending_binding& b : d.bindings) b.state->release_reference();
    }
  }
}

void encoder::dispatch(kernel work, std::span<const binding> bindings) {
  const bool webgpu = context_.get_rule() == aliasing_rule::webgpu_usage_scope;
  pending_dispatch d;
  d.work = std::move(work);
  d.bindings.reserve(bindings.size());
  for (std::size_t i = 0; i < bindings.size(); ++i) {
    detail::handle_state* state = bindings[i].target.get_state();
    if (!state) {
      throw invalid_argument("[memkit::arrays::dispatch] kernel '" + d.work.name + "' binding " +
                             std::to_string(i) + " holds no handle");
    }
    if (state->context != &context_.get_state()) {
      throw invalid_argument("[memkit::arrays::dispatch] kernel '" + d.work.name + "' binding " +
                             std::to_string(i) + " belongs to another context");
    }
    if (webgpu) {
      for (std::size_t j = 0; j < i; ++j) {
        if (bindings[j].target.get_state() == state &&
            (is_writable(bindings[i].use) || is_writable(bindings[j].use))) {
          throw invalid_argument("[memkit::arrays::dispatch] kernel '" + d.work.name +
                                 "' binds handle " + std::to_string(state->id) + " at " +
                                 std::to_string(j) + " and " + std::to_string(i) +
                                 " with a writable use; bind it once as read_write");
        }
      }
    }
    d.bindings.push_back({state, bindings[i].use});
  }
  if (pending_.empty()) {
    std::lock_guard lock(context_.get_state().mutex);
    context_.get_state().open_batches++;
  }
  // Pins: the memory stays until the batch is submitted, whoever drops the handle.
  for (pending_binding& b : d.bindings) b.state->references.fetch_add(1, std::memory_order_relaxed);
  pending_.push_back(std::move(d));
}

const batch& encoder::submit() {
  detail::context_state& state = context_.get_state();
  last_ = batch{};
  state.release_completed_deferred();
  if (pending_.empty()) return last_;
  const bool webgpu = state.options.rule == aliasing_rule::webgpu_usage_scope;

  std::unordered_map<detail::handle_state*, handle_uses> uses;
  uses.reserve(pending_.size() * 2);
  for (std::uint32_t i = 0; i < pending_.size(); ++i) {
    for (const pending_binding& b : pending_[i].bindings) {
      handle_uses& u = uses[b.state];
      if (u.dispatches.empty() || u.dispatches.back() != i) u.dispatches.push_back(i);
      u.last = i;
    }
  }

  // Buffers `target` may not share under the rule, from dispatch `from` on: those
  // of placed handles that one of its dispatches uses with the other writability.
  std::vector<std::uint32_t> excluded;
  auto collect_exclusions = [&](detail::handle_state* target, std::uint32_t from) {
    excluded.clear();
    if (!webgpu) return;
    for (std::uint32_t j : uses[target].dispatches) {
      if (j < from) continue;
      bool target_writes = false;
      for (const pending_binding& b : pending_[j].bindings) {
        if (b.state == target) target_writes = target_writes || is_writable(b.use);
      }
      for (const pending_binding& b : pending_[j].bindings) {
        if (b.state == target || !b.state->block || is_writable(b.use) == target_writes) continue;
        const std::uint32_t buffer = b.state->block->buffer;
        if (std::find(excluded.begin(), excluded.end(), buffer) == excluded.end()) {
          excluded.push_back(buffer);
        }
      }
    }
  };

  auto range_of = [](const detail::handle_state* s, access use) {
    return bound_range{s->id, s->block->buffer, s->block->offset, s->bytes, use};
  };

  std::unique_lock lock(state.mutex);
  // Moves a bound handle to a buffer that keeps the rule for dispatch `at` and the
  // rest of the batch, through a copy kernel when its bytes must be kept.
  auto relocate = [&](detail::handle_state* target, bool keep_bytes, std::uint32_t at) {
    collect_exclusions(target, at);
    detail::pool_block* old_block = target->block;
    detail::pool_block* new_block = state.place(target->bytes, excluded, lock);
    state.stats.relocations++;
    if (keep_bytes) {
      dispatch_record copy;
      copy.work.name = options_.relocation_kernel;
      copy.relocation = true;
      copy.bindings.push_back(range_of(target, access::read));
      target->block = new_block;
      copy.bindings.push_back(range_of(target, access::write));
      last_.dispatches.push_back(std::move(copy));
      state.stats.relocation_copies++;
      state.stats.relocated_bytes += target->bytes;
    }
    target->block = new_block;
    if (target->other_use) {
      // Work on another queue may still read the old bytes (record_use).
      lock.unlock();
      const std::uint64_t value = state.memory.get_backend().get_submitted(target->other_queue);
      lock.lock();
      state.deferred.push_back({old_block, memkit::fence{target->other_queue, value}});
    } else {
      // Reusable by later work on this queue, which runs after the copy.
      state.release(old_block);
    }
  };
  for (std::uint32_t i = 0; i < pending_.size(); ++i) {
    pending_dispatch& d = pending_[i];
    // 1. Bind memory for handles used for the first time, knowing the whole batch.
    for (const pending_binding& b : d.bindings) {
      if (b.state->block) continue;
      collect_exclusions(b.state, i);
      b.state->block = state.place(b.state->bytes, excluded, lock);
      b.state->bound.store(true, std::memory_order_release);
    }
    // 2. Memory bound in earlier batches may still conflict. Move the side that
    //    costs fewer copied bytes: the writable binding (free for access::write,
    //    rebound at once) or the read-only bindings in its buffer.
    if (webgpu) {
      for (const pending_binding& w : d.bindings) {
        if (!is_writable(w.use)) continue;
        std::vector<detail::handle_state*> readers;  // read-only, in w's buffer
        std::uint64_t reader_bytes = 0;
        for (const pending_binding& r : d.bindings) {
          if (is_writable(r.use) || r.state->block->buffer != w.state->block->buffer) continue;
          if (std::find(readers.begin(), readers.end(), r.state) != readers.end()) continue;
          readers.push_back(r.state);
          reader_bytes += r.state->bytes;
        }
        if (readers.empty()) continue;
        const std::uint64_t writer_bytes = w.use == access::read_write ? w.state->bytes : 0;
        if (writer_bytes <= reader_bytes) {
          relocate(w.state, w.use == access::read_write, i);
        } else {
          for (detail::handle_state* r : readers) relocate(r, true, i);
        }
      }
    }
    // 3. The dispatch as the backend binds it.
    dispatch_record& out = last_.dispatches.emplace_back();
    out.work = d.work;
    out.bindings.reserve(d.bindings.size());
    for (const pending_binding& b : d.bindings) out.bindings.push_back(range_of(b.state, b.use));
    // 4. Handles nobody owns any more are done after their last use in the batch.
    for (const pending_binding& b : d.bindings) {
      if (b.state->block && uses[b.state].last == i &&
          b.state->owners.load(std::memory_order_acquire) == 0 && !b.state->other_use) {
        state.release(b.state->block);
        b.state->block = nullptr;
        b.state->bound.store(false, std::memory_order_release);
      }
    }
  }
  lock.unlock();

  last_.fence =
      submit_ ? submit_(last_) : state.memory.get_backend().get_submitted(state.options.queue);

  std::vector<allocation> empty;
  {
    std::lock_guard relock(state.mutex);
    state.open_batches--;
    state.epoch++;
    empty = state.take_empty_buffers(state.options.empty_buffers_kept, false);
  }
  state.free_buffers(empty);
  for (pending_dispatch& d : pending_) {
    for (pending_binding& b : d.bindings) b.state->release_reference();
  }
  pending_.clear();
  return last_;
}

}  // namespace memkit::arrays

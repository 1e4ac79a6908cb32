// Handles and the context that issues them.
#include "memkit/arrays/handle.hpp"

#include "arrays/handle_pool.hpp"
#include "memkit/arrays/aliasing.hpp"
#include "memkit/arrays/context.hpp"
#include "memkit/errors.hpp"

namespace memkit::arrays {

const char* to_string(aliasing_rule rule) noexcept {
  switch (rule) {
    case aliasing_rule::none:
      return "none";
    case aliasing_rule::webgpu_usage_scope:
      return "webgpu_usage_scope";
  }
  return "unknown";
}

const char* to_string(access use) noexcept {
  switch (use) {
    case access::read:
      return "read";
    case access::write:
      return "write";
    case access::read_write:
      return "read_write";
  }
  return "unknown";
}

void detail::handle_state::release_reference() noexcept {
  if (references.fetch_sub(1, std::memory_order_acq_rel) == 1) context->destroy(this);
}

std::optional<buffer_range> handle::get_range() const {
  if (!state_) return std::nullopt;
  std::lock_guard lock(state_->context->mutex);
  if (!state_->block) return std::nullopt;
  return buffer_range{state_->block->buffer, state_->block->offset, state_->bytes};
}

context::context(allocator& memory, context_options options)
    : state_(std::make_unique<detail::context_state>(memory, options)) {}

context::~context() = default;

handle context::empty(std::size_t bytes) {
  auto* state = new detail::handle_state;
  state->id = state_->next_id.fetch_add(1, std::memory_order_relaxed);
  state->bytes = bytes;
  state->context = state_.get();
  return handle(state);
}

void context::record_use(const handle& target, queue_id queue) {
  detail::handle_state* state = target.get_state();
  if (!state) throw invalid_argument("[memkit::arrays::record_use] empty handle");
  if (queue == state_->options.queue) return;
  // Like the allocator's record_use: at release, the memory waits for the work
  // submitted on `queue` by then.
  std::lock_guard lock(state_->mutex);
  state->other_use = true;
  state->other_queue = queue;
}

aliasing_rule context::get_rule() const noexcept { return state_->options.rule; }
queue_id context::get_queue() const noexcept { return state_->options.queue; }
const context_options& context::get_options() const noexcept { return state_->options; }
allocator& context::get_allocator() const noexcept { return state_->memory; }

context_statistics context::get_statistics() const {
  std::lock_guard lock(state_->mutex);
  context_statistics s = state_->stats;
  s.handles_created = state_->next_id.load(std::memory_order_relaxed) - 1;
  return s;
}

std::size_t context::get_buffer_size(std::uint32_t buffer) const {
  std::lock_guard lock(state_->mutex);
  if (buffer >= state_->buffers.size()) {
    throw invalid_argument("[memkit::arrays::get_buffer_size] no buffer " + std::to_string(buffer));
  }
  return state_->buffers[buffer].size;
}

void context::reset_peak() {
  std::lock_guard lock(state_->mutex);
  state_->stats.peak_buffer_bytes = state_->stats.buffer_bytes;
  state_->stats.peak_live_bytes = state_->stats.live_bytes;
  state_->stats.peak_requested_bytes = state_->stats.requested_bytes;
}

void context::trim() {
  state_->release_completed_deferred();
  std::vector<allocation> empty;
  {
    std::lock_guard lock(state_->mutex);
    empty = state_->take_empty_buffers(0, true);
  }
  state_->free_buffers(empty);
}

}  // namespace memkit::arrays

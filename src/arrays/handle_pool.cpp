// Placement of handles inside the arrays layer's buffers.
#include "arrays/handle_pool.hpp"

#include <algorithm>
#include <string>

#include "common/helpers.hpp"
#include "memkit/errors.hpp"

namespace memkit::arrays::detail {

context_state::context_state(allocator& memory_in, const context_options& options_in)
    : memory(memory_in), options(options_in) {
  alignment = std::max<std::size_t>(memory.get_backend().get_facts().alignment, 256);
  if (options.buffer_bytes == 0) {
    throw invalid_argument("[memkit::arrays::context] buffer_bytes must be above 0");
  }
  options.buffer_bytes = common::round_up(options.buffer_bytes, alignment);
  if (options.min_buffer_bytes == 0) options.min_buffer_bytes = options.buffer_bytes;
  options.min_buffer_bytes =
      std::min(common::round_up(options.min_buffer_bytes, alignment), options.buffer_bytes);
  if (options.growth_divisor == 0) options.growth_divisor = 1;
  if (options.dedicated_above == 0) options.dedicated_above = options.buffer_bytes / 2;
  options.dedicated_above = std::min(options.dedicated_above, options.buffer_bytes);
}

context_state::~context_state() {
  for (pool_buffer& buffer : buffers) {
    if (buffer.held) memory.free(buffer.memory.address);
  }
}

std::uint32_t context_state::add_buffer(allocation memory_block, std::size_t size, bool dedicated) {
  const auto id = static_cast<std::uint32_t>(buffers.size());
  pool_buffer& buffer = buffers.emplace_back();
  buffer.memory = memory_block;
  buffer.size = size;
  buffer.dedicated = dedicated;
  buffer.held = true;
  pool_block* whole = ranges.make_container(size);
  whole->buffer = id;
  buffer.first = whole;
  if (!options.buffer_per_tensor) ranges.file(whole);
  stats.buffers++;
  stats.buffers_created++;
  stats.buffer_bytes += size;
  stats.peak_buffer_bytes = std::max(stats.peak_buffer_bytes, stats.buffer_bytes);
  return id;
}

void context_state::mark_live(pool_block* block, std::uint64_t requested) {
  block->live = true;
  block->requested = requested;
  buffers[block->buffer].live_bytes += block->size;
  stats.live_bytes += block->size;
  stats.peak_live_bytes = std::max(stats.peak_live_bytes, stats.live_bytes);
  stats.requested_bytes += requested;
  stats.peak_requested_bytes = std::max(stats.peak_requested_bytes, stats.requested_bytes);
  stats.placements++;
}

pool_block* context_state::try_place(std::uint64_t aligned,
                                     std::span<const std::uint32_t> excluded) {
  pool_block* block = ranges.find(aligned, [&](const pool_block* range) {
    return std::find(excluded.begin(), excluded.end(), range->buffer) == excluded.end();
  });
  if (!block) return nullptr;
  ranges.unfile(block);
  if (block->size - aligned >= alignment) ranges.file(ranges.split(block, aligned));
  return block;
}

pool_block* context_state::take_whole(std::uint32_t buffer) {
  pool_block* block = buffers[buffer].first;
  return block;
}

pool_block* context_state::place(std::uint64_t bytes, std::span<const std::uint32_t> excluded,
                                 std::unique_lock<std::mutex>& lock) {
  const std::uint64_t aligned = common::round_up(std::max<std::uint64_t>(bytes, 1), alignment);
  if (options.buffer_per_tensor) {
    // A buffer of its own: no other handle ever shares it, so nothing to exclude.
    auto cached = free_by_size.find(aligned);
    if (cached != free_by_size.end() && !cached->second.empty()) {
      const std::uint32_t id = cached->second.back();
      cached->second.pop_back();
      pool_block* block = take_whole(id);
      mark_live(block, bytes);
      return block;
    }
    lock.unlock();
    const allocation fresh = memory.allocate(aligned, options.queue);
    lock.lock();
    pool_block* block = buffers[add_buffer(fresh, aligned, true)].first;
    mark_live(block, bytes);
    return block;
  }
  if (!excluded.empty()) stats.excluded_placements++;
  if (pool_block* block = try_place(aligned, excluded)) {
    mark_live(block, bytes);
    return block;
  }
  const bool dedicated = aligned > options.dedicated_above;
  std::size_t size = aligned;
  if (!dedicated) {
    // Room the rule alone kept this request from: a buffer of its own size costs
    // least. Else grow the pool by a share of what it holds.
    const bool blocked =
        !excluded.empty() && ranges.find(aligned, [](const pool_block*) { return true; });
    if (blocked) stats.rule_buffers++;
    const std::size_t share = blocked ? 0 : stats.buffer_bytes / options.growth_divisor;
    size = common::round_up(std::max<std::size_t>(aligned, share), options.min_buffer_bytes);
    size = std::max<std::size_t>(std::min(size, options.buffer_bytes), aligned);
  }
  lock.unlock();
  allocation fresh;
  try {
    fresh = memory.allocate(size, options.queue);
  } catch (const out_of_memory&) {
    // Give back the empty buffers this pool keeps, then try once more.
    lock.lock();
    const std::vector<allocation> empty = take_empty_buffers(0, true);
    lock.unlock();
    if (empty.empty()) throw;
    free_buffers(empty);
    fresh = memory.allocate(size, options.queue);
  }
  lock.lock();
  add_buffer(fresh, size, dedicated);
  pool_block* block = try_place(aligned, excluded);
  if (!block) {
    throw invariant_violation("[memkit::arrays::place] a fresh buffer of " + std::to_string(size) +
                              " bytes did not fit " + std::to_string(aligned));
  }
  mark_live(block, bytes);
  return block;
}

void context_state::release(pool_block* block) {
  pool_buffer& buffer = buffers[block->buffer];
  if (open_batches > 0) buffer.release_epoch = epoch;
  block->live = false;
  buffer.live_bytes -= block->size;
  stats.live_bytes -= block->size;
  stats.requested_bytes -= block->requested;
  block->requested = 0;
  if (options.buffer_per_tensor) {
    free_by_size[buffer.size].push_back(block->buffer);
    return;
  }
  // Free neighbours are always merged already: one merge each way at most.
  ranges.file(ranges.release(block, [](const pool_block*, const pool_block*) { return true; }));
}

std::vector<allocation> context_state::take_empty_buffers(std::size_t keep_shared, bool all) {
  std::vector<allocation> taken;
  std::size_t kept = 0;
  for (std::uint32_t id = 0; id < buffers.size(); ++id) {
    pool_buffer& buffer = buffers[id];
    if (!buffer.held || buffer.live_bytes != 0) continue;
    // Emptied by a batch not yet submitted: the allocator's fence would not cover it.
    if (buffer.release_epoch == epoch) continue;
    if (options.buffer_per_tensor) {
      if (!all) continue;  // the per-tensor cache keeps its buffers until trim
    } else if (!buffer.dedicated && kept < keep_shared) {
      ++kept;
      continue;
    }
    ranges.discard(buffer.first);
    buffer.first = nullptr;
    buffer.held = false;
    stats.buffers--;
    stats.buffer_bytes -= buffer.size;
    taken.push_back(buffer.memory);
  }
  if (options.buffer_per_tensor && all) {
    for (auto& [size, ids] : free_by_size) {
      std::erase_if(ids, [&](std::uint32_t id) { return !buffers[id].held; });
    }
  }
  return taken;
}

void context_state::free_buffers(const std::vector<allocation>& taken) {
  // Queue-ordered: work already submitted on the context's queue finishes before
  // the allocator hands these bytes to another queue.
  for (const allocation& a : taken) memory.free(a.address);
}

void context_state::release_completed_deferred() {
  std::vector<fence> fences;
  {
    std::lock_guard lock(mutex);
    if (deferred.empty()) return;
    for (const deferred_release& d : deferred) fences.push_back(d.other);
  }
  std::vector<bool> done(fences.size());
  backend& device = memory.get_backend();
  for (std::size_t i = 0; i < fences.size(); ++i) {
    done[i] = device.get_completed(fences[i].queue) >= fences[i].value;
  }
  std::lock_guard lock(mutex);
  // Entries only ever get appended, so the first fences.size() are the ones checked.
  std::vector<deferred_release> waiting;
  for (std::size_t i = 0; i < deferred.size(); ++i) {
    if (i < done.size() && done[i]) {
      release(deferred[i].block);
    } else {
      waiting.push_back(deferred[i]);
    }
  }
  deferred = std::move(waiting);
}

void context_state::destroy(handle_state* state) {
  bool pending_other = false;
  if (state->other_use) {
    backend& device = memory.get_backend();
    state->other_fence = device.get_submitted(state->other_queue);
    pending_other = device.get_completed(state->other_queue) < state->other_fence;
  }
  {
    std::lock_guard lock(mutex);
    if (state->block) {
      if (pending_other) {
        deferred.push_back({state->block, fence{state->other_queue, state->other_fence}});
      } else {
        release(state->block);
      }
      state->block = nullptr;
    }
  }
  delete state;
}

}  // namespace memkit::arrays::detail

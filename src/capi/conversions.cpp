// The C structs of memkit.h made from the C++ values and back (memkit/capi.hpp).
#include <cmath>
#include <memory>
#include <string>

#include "memkit/capi.hpp"

namespace memkit::capi {

allocator_options to_options(const memkit_allocator_options& c, const char* function) {
  allocator_options options;
  switch (c.policy) {
    case MEMKIT_POLICY_AUTOMATIC:
      options.policy = pool_policy::automatic;
      break;
    case MEMKIT_POLICY_SEGMENTS:
      options.policy = pool_policy::segments;
      break;
    case MEMKIT_POLICY_ARENA:
      options.policy = pool_policy::arena;
      break;
    default:
      throw invalid_argument(std::string("[") + function + "] policy " +
                             std::to_string(static_cast<int>(c.policy)) +
                             " is not a memkit_policy");
  }
  if (!std::isfinite(c.arena_slack) || c.arena_slack < 0) {
    throw invalid_argument(std::string("[") + function + "] arena_slack " +
                           std::to_string(c.arena_slack) + " is not a finite number >= 0");
  }
  options.memory_limit = c.memory_limit;
  options.cache_limit = c.cache_limit;
  options.wired_limit = c.wired_limit;
  options.arena_slack = c.arena_slack;
  options.validate = c.validate != 0;
  options.thread_cache = c.thread_cache != 0;
  options.plan_loops = c.plan_loops != 0;
  options.order_queues = c.order_queues != 0;
  return options;
}

memkit_statistics to_c_statistics(const statistics& s) {
  return memkit_statistics{s.active_bytes,
                           s.peak_active_bytes,
                           s.requested_bytes,
                           s.peak_requested_bytes,
                           s.cached_bytes,
                           s.reserved_bytes,
                           s.peak_reserved_bytes,
                           s.allocations,
                           s.frees,
                           s.cache_hits,
                           s.backend_allocations,
                           s.backend_frees,
                           s.retries,
                           s.out_of_memory,
                           s.live_blocks,
                           s.segments,
                           s.maps,
                           s.unmaps,
                           s.queue_orders,
                           s.moves,
                           s.returns};
}

memkit_snapshot* make_c_snapshot(const std::vector<segment_view>& views) {
  std::size_t block_count = 0;
  for (const segment_view& v : views) block_count += v.blocks.size();
  auto snapshot = std::make_unique<memkit_snapshot>();
  auto segments = std::make_unique<memkit_segment_record[]>(views.size());
  auto blocks = std::make_unique<memkit_block_record[]>(block_count);
  std::size_t next_block = 0;
  for (std::size_t i = 0; i < views.size(); ++i) {
    const segment_view& v = views[i];
    segments[i] =
        memkit_segment_record{v.base, v.size, v.small, v.blocks.size(), blocks.get() + next_block};
    for (const block_view& b : v.blocks) {
      blocks[next_block++] = memkit_block_record{b.offset, b.size, b.requested, b.live};
    }
  }
  *snapshot = memkit_snapshot{views.size(), segments.release(), block_count, blocks.release()};
  return snapshot.release();
}

void destroy_c_snapshot(memkit_snapshot* snapshot) noexcept {
  if (!snapshot) return;
  delete[] snapshot->segments;
  delete[] snapshot->blocks;
  delete snapshot;
}

}  // namespace memkit::capi

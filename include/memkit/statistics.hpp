// What the allocator counts. get_statistics() reads these counters; calculate_statistics()
// recounts them from the blocks themselves.
#pragma once

#include <cstddef>
#include <cstdint>

namespace memkit {

struct statistics {
  std::size_t active_bytes = 0;           // real sizes of live blocks
  std::size_t peak_active_bytes = 0;      // largest active_bytes since reset_peak
  std::size_t requested_bytes = 0;        // requested sizes of live blocks
  std::size_t peak_requested_bytes = 0;   // largest requested_bytes since reset_peak
  std::size_t cached_bytes = 0;           // reserved_bytes - active_bytes
  std::size_t reserved_bytes = 0;         // bytes held from the backend
  std::size_t peak_reserved_bytes = 0;    // largest reserved_bytes since reset_peak
  std::uint64_t allocations = 0;          // successful allocate calls with bytes > 0
  std::uint64_t frees = 0;                // free calls of live blocks
  std::uint64_t cache_hits = 0;           // allocations served without the backend
  std::uint64_t backend_allocations = 0;  // segments and physical pages asked of the backend
  std::uint64_t backend_frees = 0;        // segments and physical pages given back
  std::uint64_t maps = 0;                 // pages mapped (arena)
  std::uint64_t unmaps = 0;               // pages unmapped (arena)
  std::uint64_t moves = 0;                // pages moved to another address (arena: a map each)
  std::uint64_t returns = 0;              // pages moved back where still mapped (no call)
  std::uint64_t retries = 0;              // waits for queued work before retrying
  std::uint64_t queue_orders = 0;         // queues made to wait for another's fence on the device
  std::uint64_t out_of_memory = 0;        // requests that ended in out_of_memory
  std::size_t live_blocks = 0;            // blocks handed out and not freed
  std::size_t segments = 0;               // segments held

  friend bool operator==(const statistics&, const statistics&) = default;
};

// Adds the counters of `s` to `total`, field by field; peaks too (a sum of peaks bounds
// the peak of the sum: a caller that knows better sets them after).
inline void add_counters(statistics& total, const statistics& s) {
  total.active_bytes += s.active_bytes;
  total.peak_active_bytes += s.peak_active_bytes;
  total.requested_bytes += s.requested_bytes;
  total.peak_requested_bytes += s.peak_requested_bytes;
  total.cached_bytes += s.cached_bytes;
  total.reserved_bytes += s.reserved_bytes;
  total.peak_reserved_bytes += s.peak_reserved_bytes;
  total.allocations += s.allocations;
  total.frees += s.frees;
  total.cache_hits += s.cache_hits;
  total.backend_allocations += s.backend_allocations;
  total.backend_frees += s.backend_frees;
  total.maps += s.maps;
  total.unmaps += s.unmaps;
  total.moves += s.moves;
  total.returns += s.returns;
  total.retries += s.retries;
  total.queue_orders += s.queue_orders;
  total.out_of_memory += s.out_of_memory;
  total.live_blocks += s.live_blocks;
  total.segments += s.segments;
}

}  // namespace memkit

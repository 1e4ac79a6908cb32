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
  std::uint64_t retries = 0;              // waits for queued work before retrying
  std::uint64_t out_of_memory = 0;        // requests that ended in out_of_memory
  std::size_t live_blocks = 0;            // blocks handed out and not freed
  std::size_t segments = 0;               // segments held

  friend bool operator==(const statistics&, const statistics&) = default;
};

}  // namespace memkit

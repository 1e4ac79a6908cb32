// memkit::statistics as the C API's memkit_statistics: one conversion for the C
// API and the PyTorch library, so a field added to one reaches both.
#pragma once

#include "memkit/memkit.h"
#include "memkit/statistics.hpp"

namespace memkit::capi {

inline memkit_statistics to_c_statistics(const statistics& s) {
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
                           s.unmaps};
}

}  // namespace memkit::capi

// memkit::statistics as the C API's memkit_statistics: one conversion for the C
// API and the PyTorch library, so a field added to one reaches both.
#pragma once

#include <array>
#include <cstdint>

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

// The fields of memkit_statistics by name, in the struct's order: the Python package
// and the PyTorch library's memkit_torch_statistics_fields() name them from here.
struct statistics_field {
  const char* name;
  std::uint64_t (*get)(const statistics&);
};
inline constexpr std::array<statistics_field, 18> statistics_fields = {{
    {"active_bytes", [](const statistics& s) -> std::uint64_t { return s.active_bytes; }},
    {"peak_active_bytes", [](const statistics& s) -> std::uint64_t { return s.peak_active_bytes; }},
    {"requested_bytes", [](const statistics& s) -> std::uint64_t { return s.requested_bytes; }},
    {"peak_requested_bytes",
     [](const statistics& s) -> std::uint64_t { return s.peak_requested_bytes; }},
    {"cached_bytes", [](const statistics& s) -> std::uint64_t { return s.cached_bytes; }},
    {"reserved_bytes", [](const statistics& s) -> std::uint64_t { return s.reserved_bytes; }},
    {"peak_reserved_bytes",
     [](const statistics& s) -> std::uint64_t { return s.peak_reserved_bytes; }},
    {"allocations", [](const statistics& s) -> std::uint64_t { return s.allocations; }},
    {"frees", [](const statistics& s) -> std::uint64_t { return s.frees; }},
    {"cache_hits", [](const statistics& s) -> std::uint64_t { return s.cache_hits; }},
    {"backend_allocations",
     [](const statistics& s) -> std::uint64_t { return s.backend_allocations; }},
    {"backend_frees", [](const statistics& s) -> std::uint64_t { return s.backend_frees; }},
    {"retries", [](const statistics& s) -> std::uint64_t { return s.retries; }},
    {"out_of_memory", [](const statistics& s) -> std::uint64_t { return s.out_of_memory; }},
    {"live_blocks", [](const statistics& s) -> std::uint64_t { return s.live_blocks; }},
    {"segments", [](const statistics& s) -> std::uint64_t { return s.segments; }},
    {"maps", [](const statistics& s) -> std::uint64_t { return s.maps; }},
    {"unmaps", [](const statistics& s) -> std::uint64_t { return s.unmaps; }},
}};

}  // namespace memkit::capi

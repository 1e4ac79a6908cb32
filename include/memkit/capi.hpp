// The C API (memkit/memkit.h) seen from C++: what a library that speaks the C API
// beside the C++ one (the C API itself, the PyTorch library, the Python package)
// needs to answer in its terms, written once: the status of a failure, and the C
// structs made from the C++ values and back. Defined in src/capi/.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "memkit/allocator.hpp"
#include "memkit/errors.hpp"
#include "memkit/memkit.h"
#include "memkit/statistics.hpp"

namespace memkit::capi {

// What a failed call tells its C caller.
struct failure {
  memkit_status status = MEMKIT_INTERNAL_ERROR;
  const char* message = "";          // the exception's: valid while it is being handled
  out_of_memory::details details{};  // out_of_memory's; zeros for the others
};

// The failure of the exception being handled: call it from a catch block. The one
// mapping of exceptions to statuses: out_of_memory (and the host's std::bad_alloc)
// MEMKIT_OUT_OF_MEMORY, invalid_argument MEMKIT_INVALID_ARGUMENT, unavailable
// MEMKIT_UNAVAILABLE, anything else MEMKIT_INTERNAL_ERROR.
failure get_current_failure() noexcept;

// Runs f: MEMKIT_OK, or the status of what it threw, after on_failure(failure),
// which runs while the exception is handled (its message is valid there).
template <class F, class OnFailure>
memkit_status run_guarded(F&& f, OnFailure&& on_failure) noexcept {
  try {
    f();
    return MEMKIT_OK;
  } catch (...) {
    const failure failed = get_current_failure();
    on_failure(failed);
    return failed.status;
  }
}

// memkit_allocator_options as allocator_options, checked: a bad value throws
// invalid_argument naming `function`.
allocator_options to_options(const memkit_allocator_options& c, const char* function);

// memkit::statistics as memkit_statistics, field by field.
memkit_statistics to_c_statistics(const statistics& s);

// memkit_snapshot from the allocator's segments: three allocations, given back
// together by destroy_c_snapshot.
memkit_snapshot* make_c_snapshot(const std::vector<segment_view>& views);
void destroy_c_snapshot(memkit_snapshot* snapshot) noexcept;

// The fields of memkit_statistics by name, in the struct's order: the Python package
// and the PyTorch library's memkit_torch_statistics_fields() name them from here.
struct statistics_field {
  const char* name;
  std::uint64_t (*get)(const statistics&);
};
inline constexpr std::array<statistics_field, 21> statistics_fields = {{
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
    {"queue_orders", [](const statistics& s) -> std::uint64_t { return s.queue_orders; }},
    {"moves", [](const statistics& s) -> std::uint64_t { return s.moves; }},
    {"returns", [](const statistics& s) -> std::uint64_t { return s.returns; }},
}};

}  // namespace memkit::capi

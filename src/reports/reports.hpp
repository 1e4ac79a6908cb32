// The JSON documents of `memkit replay --json` and `memkit plan --json`, built in one
// place for the command-line tool and the Python package (memkit.replay and
// memkit.plan), so that both give the same keys and values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "memkit/allocator.hpp"
#include "memkit/planner.hpp"
#include "memkit/report_html.hpp"
#include "memkit/trace.hpp"

namespace memkit::reports {

// "automatic", "segments" or "arena".
const char* policy_name(pool_policy policy) noexcept;
// "sim" or "cpu".
const char* backend_name(trace::backend_kind device) noexcept;

// numerator / denominator; 0 when the denominator is 0.
double ratio(std::size_t numerator, std::size_t denominator) noexcept;
// A plan's height over LOAD; 1 for an empty instance.
double height_over_load(std::int64_t height, std::int64_t load) noexcept;
// count / steps; 0 without steps.
double per_step(std::uint64_t count, std::uint64_t steps) noexcept;
// A metadata value that is a whole number of bytes (pytorch_peak_reserved, ...).
std::optional<std::size_t> metadata_bytes(const trace::trace_data& trace, std::string_view key);

// One replayed trace: its figures, the options it ran with and, when it was found,
// the smallest capacity it runs in.
nlohmann::json replay_json(const trace::report_section& section);

// What `memkit plan` planned and how.
struct plan_summary {
  std::string source;  // the instance or trace path
  bool from_trace = false;
  std::size_t buffers = 0;
  const planner::result* result = nullptr;
  std::optional<std::int64_t> capacity;
  double time_limit_seconds = 0;
  bool fits = false;
  std::optional<std::string> output;  // the plan file written, if any
};
nlohmann::json plan_json(const plan_summary& summary);

}  // namespace memkit::reports

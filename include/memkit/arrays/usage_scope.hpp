// A checker of WebGPU's usage-scope rule, as the specification states it for
// compute passes: every dispatch is one usage scope; within it the uses of one
// buffer must form a compatible usage list (all read-only — read-only storage,
// uniform — or all writable storage), and no writable buffer binding may overlap
// another binding of the same buffer. Tests run every plan through it; Dawn on
// the GPU machine checks the same plans for real.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "memkit/arrays/binding.hpp"

namespace memkit::arrays {

struct usage_violation {
  std::size_t dispatch = 0;  // index the caller gave
  std::uint32_t buffer = 0;
  std::string message;
};

// The violations of one dispatch's bindings (empty when it is valid).
std::vector<usage_violation> check_usage_scope(std::span<const bound_range> bindings,
                                               std::size_t dispatch = 0);

// Violations over many dispatches, numbered in order.
std::vector<usage_violation> check_usage_scope(std::span<const dispatch_record> dispatches);

}  // namespace memkit::arrays

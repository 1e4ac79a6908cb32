// WebGPU usage-scope validation of compute dispatches (the specification's
// "compatible usage list" and writable-binding aliasing checks), for buffers.
#include "memkit/arrays/usage_scope.hpp"

#include <algorithm>
#include <map>

namespace memkit::arrays {

std::vector<usage_violation> check_usage_scope(std::span<const bound_range> bindings,
                                               std::size_t dispatch) {
  std::vector<usage_violation> found;
  struct buffer_uses {
    std::vector<const bound_range*> writable;
    std::size_t read_only = 0;
  };
  std::map<std::uint32_t, buffer_uses> by_buffer;
  for (const bound_range& b : bindings) {
    buffer_uses& u = by_buffer[b.buffer];
    if (is_writable(b.use)) {
      u.writable.push_back(&b);
    } else {
      u.read_only++;
    }
  }
  for (auto& [buffer, u] : by_buffer) {
    if (!u.writable.empty() && u.read_only > 0) {
      found.push_back({dispatch, buffer,
                       "buffer " + std::to_string(buffer) +
                           ": usage (storage read-write|storage read-only) includes writable "
                           "usage and another usage in the same usage scope"});
    }
    std::sort(u.writable.begin(), u.writable.end(),
              [](const bound_range* a, const bound_range* b) { return a->offset < b->offset; });
    for (std::size_t k = 1; k < u.writable.size(); ++k) {
      const bound_range& lower = *u.writable[k - 1];
      const bound_range& upper = *u.writable[k];
      if (lower.offset + lower.size > upper.offset) {
        found.push_back({dispatch, buffer,
                         "buffer " + std::to_string(buffer) + ": writable bindings [" +
                             std::to_string(lower.offset) + ", " +
                             std::to_string(lower.offset + lower.size) + ") and [" +
                             std::to_string(upper.offset) + ", " +
                             std::to_string(upper.offset + upper.size) + ") overlap"});
      }
    }
  }
  return found;
}

std::vector<usage_violation> check_usage_scope(std::span<const dispatch_record> dispatches) {
  std::vector<usage_violation> found;
  for (std::size_t i = 0; i < dispatches.size(); ++i) {
    std::vector<usage_violation> one = check_usage_scope(dispatches[i].bindings, i);
    found.insert(found.end(), one.begin(), one.end());
  }
  return found;
}

}  // namespace memkit::arrays

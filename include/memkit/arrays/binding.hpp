// A binding: one use of a handle by one kernel, with its access. Before submit it
// names a handle; once the encoder has placed the batch it is a bound range, the
// (buffer, offset, size, access) a backend hands to the dispatch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "memkit/arrays/aliasing.hpp"
#include "memkit/arrays/handle.hpp"

namespace memkit::arrays {

struct binding {
  handle target;
  access use = access::read;
};

// A binding resolved to memory. buffer is the arrays layer's buffer id (one
// backend buffer, e.g. one GPUBuffer); offset is from that buffer's start.
struct bound_range {
  handle_id handle = 0;
  std::uint32_t buffer = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;  // the handle's bytes
  access use = access::read;
};

// What a kernel is, for the backend that runs it: a name and scalar arguments.
struct kernel {
  std::string name;
  std::vector<float> arguments;
};

// One dispatch as submitted: the kernel and its bindings in binding order.
struct dispatch_record {
  kernel work;
  std::vector<bound_range> bindings;
  bool relocation = false;  // a copy the encoder inserted to move a binding
};

}  // namespace memkit::arrays

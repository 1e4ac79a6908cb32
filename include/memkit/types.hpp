// The ground floor: the numbers every layer speaks of (docs/ARCHITECTURE.md). No
// behaviour, no other memkit header: placement and pools include this one rather
// than the backend interface, so that they stay numbers only.
#pragma once

#include <cstdint>

namespace memkit {

using address_t = std::uintptr_t;   // a device address; the core never dereferences it
using queue_id = std::uint32_t;     // a queue (a CUDA stream, a Vulkan queue, ...)
using page_id = std::uint64_t;      // a physical page allocation (virtual-memory backends); 0: none
using page_index = std::uint32_t;   // a page of a reserved range, counted from its base
using fence_value = std::uint64_t;  // a point in one queue; values complete in order
// A free's place in the allocator's order of frees: a fence recorded after it covers it.
using serial_t = std::uint64_t;

// A point in a queue. Fences on one queue complete in order of their values, so
// `value <= completed(queue)` means everything up to it has finished.
struct fence {
  queue_id queue = 0;
  fence_value value = 0;
};

}  // namespace memkit

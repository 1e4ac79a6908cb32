// The narrow interface every backend implements (DESIGN.md, "backend primitives").
// A backend hands out raw segments, optionally reserves address space and maps
// physical pages into it, and runs queues whose fences complete in order. It holds
// no policy: the allocator decides what to ask for and when.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace memkit {

using address_t = std::uintptr_t;  // a device address; the core never dereferences it
using queue_id = std::uint32_t;    // a queue (a CUDA stream, a Vulkan queue, ...)
using page_id = std::uint64_t;     // a physical page allocation (virtual-memory backends)

// A point in a queue. Fences on one queue complete in order of their values, so
// `value <= completed(queue)` means everything up to it has finished.
struct fence {
  queue_id queue = 0;
  std::uint64_t value = 0;
};

struct device_facts {
  std::string name;               // "cpu", "sim", "cuda:0", ...
  std::size_t capacity = 0;       // bytes of memory the device has
  std::size_t granularity = 1;    // segment sizes are rounded up to a multiple of this
  std::size_t max_buffer = 0;     // largest single segment
  std::size_t alignment = 256;    // every block offset is a multiple of this
  std::size_t max_wired = 0;      // most bytes that may be kept resident
  std::uint32_t queue_count = 1;  // queues 0 .. queue_count-1 exist
  bool unified = false;           // host and device views are one pointer
  bool virtual_memory = false;    // reserve_range / create_page / map / unmap work
};

class backend {
 public:
  virtual ~backend() = default;
  virtual const device_facts& get_facts() const noexcept = 0;

  // Segments. allocate_segment returns 0 when the device has no room.
  virtual address_t allocate_segment(std::size_t bytes) = 0;
  virtual void free_segment(address_t address, std::size_t bytes) = 0;

  // Queues. get_submitted is the fence value that covers all work submitted so
  // far on the queue (it may record a new fence); get_completed is the highest
  // value known complete; wait blocks until the fence completes.
  virtual std::uint64_t get_submitted(queue_id queue) = 0;
  virtual std::uint64_t get_completed(queue_id queue) const = 0;
  virtual void wait(fence f) = 0;

  // Residency: the allocator tells the backend how many bytes it may keep wired.
  virtual void set_wired_limit(std::size_t /*bytes*/) {}

  // Host view of device memory on unified backends; nullptr where there is none.
  virtual void* get_host_pointer(address_t /*address*/) const { return nullptr; }

  // Virtual memory (only where get_facts().virtual_memory). Sizes and offsets are
  // multiples of the granularity. reserve_range and create_page return 0 on failure.
  virtual address_t reserve_range(std::size_t /*bytes*/) { return 0; }
  virtual void release_range(address_t /*base*/, std::size_t /*bytes*/) {}
  virtual page_id create_page(std::size_t /*bytes*/) { return 0; }
  virtual void release_page(page_id /*page*/, std::size_t /*bytes*/) {}
  virtual void map(address_t /*at*/, page_id /*page*/, std::size_t /*bytes*/) {}
  virtual void unmap(address_t /*at*/, std::size_t /*bytes*/) {}
};

}  // namespace memkit

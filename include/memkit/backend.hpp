// The narrow interface every backend implements (docs/ARCHITECTURE.md, "The backend interface").
// A backend hands out raw segments, optionally reserves address space and maps
// physical pages into it, and runs queues whose fences complete in order. It holds
// no policy: the allocator decides what to ask for and when. What a backend may
// offer beyond this (peer access, sharing with other processes) is a capability,
// found with find_capability (memkit/capabilities.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "memkit/errors.hpp"
#include "memkit/types.hpp"

namespace memkit {

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
  bool webgpu_rules = false;      // WebGPU's storage rules apply (a bool stored in 4 bytes)
};

// How a transfer converts elements between the host's layout and the device's.
enum class element_conversion : std::uint8_t {
  none,    // bytes move as they are
  bool32,  // a host bool of 1 byte is a device bool of 4 bytes (0 or 1)
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
  virtual fence_value get_submitted(queue_id queue) = 0;
  virtual fence_value get_completed(queue_id queue) const = 0;
  virtual void wait(fence f) = 0;

  // Residency: the allocator tells the backend how many bytes it may keep wired.
  virtual void set_wired_limit(std::size_t /*bytes*/) {}

  // Host view of device memory on unified backends; nullptr where there is none.
  virtual void* get_host_pointer(address_t /*address*/) const { return nullptr; }

  // Transfers, ordered after the work already on `queue`. host_bytes counts the
  // host's layout; with bool32 the device side holds 4 bytes an element.
  // copy_to_device may return before the copy runs (src is free to reuse at once);
  // copy_to_host returns once dst holds the data. The defaults serve backends with
  // a host pointer; others override them.
  virtual void copy_to_device(address_t dst, const void* src, std::size_t host_bytes,
                              queue_id /*queue*/,
                              element_conversion conversion = element_conversion::none) {
    store_elements(require_host_pointer(dst, "copy_to_device"), src, host_bytes, conversion);
  }
  virtual void copy_to_host(void* dst, address_t src, std::size_t host_bytes, queue_id /*queue*/,
                            element_conversion conversion = element_conversion::none) {
    load_elements(dst, require_host_pointer(src, "copy_to_host"), host_bytes, conversion);
  }
  // Kernel hooks, queued on `queue`: fill writes a 32-bit pattern over `bytes` (a
  // multiple of 4); copy moves `bytes` (a multiple of 4) between device blocks.
  virtual void fill(address_t dst, std::size_t bytes, std::uint32_t pattern, queue_id /*queue*/) {
    auto* device = static_cast<unsigned char*>(require_host_pointer(dst, "fill"));
    for (std::size_t i = 0; i + 4 <= bytes; i += 4) std::memcpy(device + i, &pattern, 4);
  }
  virtual void copy(address_t dst, address_t src, std::size_t bytes, queue_id /*queue*/) {
    if (bytes)
      std::memmove(require_host_pointer(dst, "copy"), require_host_pointer(src, "copy"), bytes);
  }

  // Virtual memory (only where get_facts().virtual_memory). Sizes and offsets are
  // multiples of the granularity. reserve_range and create_page return 0 on failure.
  virtual address_t reserve_range(std::size_t /*bytes*/) { return 0; }
  virtual void release_range(address_t /*base*/, std::size_t /*bytes*/) {}
  virtual page_id create_page(std::size_t /*bytes*/) { return 0; }
  virtual void release_page(page_id /*page*/, std::size_t /*bytes*/) {}
  virtual void map(address_t /*at*/, page_id /*page*/, std::size_t /*bytes*/) {}
  // Makes mapped pages usable by the device; called once over a run of pages
  // mapped together, since on CUDA it is the costly step.
  virtual void set_access(address_t /*at*/, std::size_t /*bytes*/) {}
  virtual void unmap(address_t /*at*/, std::size_t /*bytes*/) {}

 protected:
  // Host-side conversion, for backends whose device bytes the host can reach.
  static void store_elements(void* device, const void* host, std::size_t host_bytes,
                             element_conversion conversion) {
    if (conversion == element_conversion::none) {
      if (host_bytes) std::memcpy(device, host, host_bytes);
      return;
    }
    for (std::size_t i = 0; i < host_bytes; ++i) {
      const std::uint32_t word = static_cast<const unsigned char*>(host)[i] != 0;
      std::memcpy(static_cast<unsigned char*>(device) + 4 * i, &word, 4);
    }
  }
  static void load_elements(void* host, const void* device, std::size_t host_bytes,
                            element_conversion conversion) {
    if (conversion == element_conversion::none) {
      if (host_bytes) std::memcpy(host, device, host_bytes);
      return;
    }
    for (std::size_t i = 0; i < host_bytes; ++i) {
      std::uint32_t word;
      std::memcpy(&word, static_cast<const unsigned char*>(device) + 4 * i, 4);
      static_cast<unsigned char*>(host)[i] = word != 0;
    }
  }

 private:
  void* require_host_pointer(address_t address, const char* function) const {
    void* host = get_host_pointer(address);
    if (!host) {
      throw invalid_argument(std::string("[memkit::backend::") + function + "] " +
                             get_facts().name + " has no host pointer and no transfers of its own");
    }
    return host;
  }
};

// A capability the backend offers (peer_access, memory_sharing: a class the backend
// also derives from), or nullptr where it offers none.
template <class Capability>
Capability* find_capability(backend& device) noexcept {
  return dynamic_cast<Capability*>(&device);
}
template <class Capability>
const Capability* find_capability(const backend& device) noexcept {
  return dynamic_cast<const Capability*>(&device);
}

}  // namespace memkit

// The data interface (docs/ARCHITECTURE.md, "The backend interfaces"): what the
// arrays layer asks of a device beside memory. Moving bytes to and from the host,
// filling and copying device blocks, the host view of unified memory, and the
// storage rules the device's kernels follow. A backend offers it by deriving from
// device_data as well as from backend (the memory interface, all the allocator
// sees); the arrays layer finds it with find_capability<device_data>(backend).
#pragma once

#include <cstddef>
#include <cstdint>

#include "memkit/backend.hpp"
#include "memkit/types.hpp"

namespace memkit {

// How a transfer converts elements between the host's layout and the device's.
enum class element_conversion : std::uint8_t {
  none,    // bytes move as they are
  bool32,  // a host bool of 1 byte is a device bool of 4 bytes (0 or 1)
};

class device_data {
 public:
  virtual ~device_data() = default;

  // WebGPU's storage rules apply (a bool stored in 4 bytes, binding offsets at
  // multiples of 256 bytes); otherwise the framework's own layout does.
  virtual bool follows_webgpu_rules() const noexcept { return false; }

  // Host view of device memory on unified devices; nullptr where there is none.
  virtual void* get_host_pointer(address_t /*address*/) const { return nullptr; }

  // Transfers, ordered after the work already on `queue`. host_bytes counts the
  // host's layout; with bool32 the device side holds 4 bytes an element.
  // copy_to_device may return before the copy runs (src is free to reuse at once);
  // copy_to_host returns once dst holds the data. The defaults serve devices with
  // a host pointer; others override them.
  virtual void copy_to_device(address_t dst, const void* src, std::size_t host_bytes,
                              queue_id queue,
                              element_conversion conversion = element_conversion::none);
  virtual void copy_to_host(void* dst, address_t src, std::size_t host_bytes, queue_id queue,
                            element_conversion conversion = element_conversion::none);
  // Kernel hooks, queued on `queue`: fill writes a 32-bit pattern over `bytes` (a
  // multiple of 4); copy moves `bytes` (a multiple of 4) between device blocks.
  virtual void fill(address_t dst, std::size_t bytes, std::uint32_t pattern, queue_id queue);
  virtual void copy(address_t dst, address_t src, std::size_t bytes, queue_id queue);

 protected:
  // Host-side conversion, for devices whose bytes the host can reach.
  static void store_elements(void* device, const void* host, std::size_t host_bytes,
                             element_conversion conversion);
  static void load_elements(void* host, const void* device, std::size_t host_bytes,
                            element_conversion conversion);

 private:
  void* require_host_pointer(address_t address, const char* function) const;
};

// The data interface of a backend an adaptor wraps (fault injection, a device set's
// budget): every call goes to the wrapped backend's, and one that has none is
// named in the error.
class forwarded_data : public device_data {
 public:
  explicit forwarded_data(backend& wrapped) noexcept
      : wrapped_(find_capability<device_data>(wrapped)) {}

  bool follows_webgpu_rules() const noexcept override {
    return wrapped_ && wrapped_->follows_webgpu_rules();
  }
  void* get_host_pointer(address_t address) const override {
    return wrapped_ ? wrapped_->get_host_pointer(address) : nullptr;
  }
  void copy_to_device(address_t dst, const void* src, std::size_t host_bytes, queue_id queue,
                      element_conversion conversion = element_conversion::none) override {
    require("copy_to_device").copy_to_device(dst, src, host_bytes, queue, conversion);
  }
  void copy_to_host(void* dst, address_t src, std::size_t host_bytes, queue_id queue,
                    element_conversion conversion = element_conversion::none) override {
    require("copy_to_host").copy_to_host(dst, src, host_bytes, queue, conversion);
  }
  void fill(address_t dst, std::size_t bytes, std::uint32_t pattern, queue_id queue) override {
    require("fill").fill(dst, bytes, pattern, queue);
  }
  void copy(address_t dst, address_t src, std::size_t bytes, queue_id queue) override {
    require("copy").copy(dst, src, bytes, queue);
  }

 private:
  device_data& require(const char* function) const;
  device_data* wrapped_;
};

}  // namespace memkit

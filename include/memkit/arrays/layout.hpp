// Storage layouts: how a backend stores an array's elements.
//
// The framework sees every dtype in its own layout (a bool is 1 byte). A device
// may store it differently: under WebGPU's rules (WebGPU itself, and a Vulkan
// device in WebGPU-compatible mode) a bool is 4 bytes, and bindings start at
// multiples of 256 bytes. Every stored size is a multiple of 4 bytes, since
// shaders address 32-bit words. Host views keep the framework's layout; the
// conversion happens on upload and download, and statistics count stored bytes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "memkit/backend.hpp"
#include "memkit/device_data.hpp"

namespace memkit::arrays {

enum class dtype : std::uint8_t {
  boolean,
  int8,
  uint8,
  int16,
  uint16,
  float16,
  bfloat16,
  int32,
  uint32,
  float32,
  int64,
  uint64,
  float64,
};

// Bytes of one element in the framework's own layout.
std::size_t get_element_bytes(dtype type) noexcept;
const char* get_name(dtype type) noexcept;

// The storage rules a device follows.
struct storage_rules {
  const char* name = "native";       // "native" or "webgpu"
  std::size_t bool_bytes = 1;        // bytes a stored bool takes
  std::size_t offset_alignment = 4;  // binding offsets are multiples of this
  std::size_t size_multiple = 4;     // stored sizes are multiples of this
};

// WebGPU's rules: bool in 4 bytes, 256-byte binding offsets.
inline constexpr std::size_t kWebgpuOffsetAlignment = 256;
storage_rules get_native_rules(const device_facts& facts) noexcept;
storage_rules get_webgpu_rules(const device_facts& facts) noexcept;
// The rules the device follows: WebGPU's where its data interface says so.
storage_rules get_storage_rules(const device_facts& facts, const device_data& data) noexcept;

// How one dtype is stored under one set of rules.
struct storage_layout {
  dtype type = dtype::uint8;
  std::size_t host_element_bytes = 1;    // in the framework's layout
  std::size_t device_element_bytes = 1;  // as stored on the device
  std::size_t offset_alignment = 4;
  std::size_t size_multiple = 4;
  element_conversion conversion = element_conversion::none;

  // Bytes the host view of `count` elements takes.
  std::size_t get_host_bytes(std::size_t count) const noexcept {
    return count * host_element_bytes;
  }
  // Bytes the device stores for `count` elements, padding included.
  std::size_t get_stored_bytes(std::size_t count) const noexcept {
    const std::size_t bytes = count * device_element_bytes;
    return (bytes + size_multiple - 1) / size_multiple * size_multiple;
  }
  // Host and device bytes are the same: a unified device can share them.
  bool is_identity() const noexcept { return conversion == element_conversion::none; }
};

storage_layout get_storage_layout(dtype type, const storage_rules& rules) noexcept;

}  // namespace memkit::arrays

// Aliasing rules: which bindings of one dispatch may share a backend buffer. A
// property of the backend that the arrays layer reads; the backend interface and
// the allocator know nothing of it.
#pragma once

#include <cstdint>

namespace memkit::arrays {

enum class aliasing_rule : std::uint8_t {
  // CPU, CUDA: any bindings may share a buffer, even overlap.
  none,
  // WebGPU (and Vulkan run in WebGPU-compatible mode): each dispatch is one usage
  // scope; the uses of one buffer in it must be all read-only or all writable
  // storage, and writable bindings of one buffer must not overlap. A kernel's
  // output may not sit in the buffer of any of its read-only inputs, even at
  // another offset.
  webgpu_usage_scope,
};

// How one kernel uses one binding.
enum class access : std::uint8_t {
  read,        // read-only storage (or uniform)
  write,       // writable storage; the kernel overwrites every byte of the binding
  read_write,  // writable storage; bytes the kernel does not write keep their value
};

constexpr bool is_writable(access use) noexcept { return use != access::read; }

const char* to_string(aliasing_rule rule) noexcept;
const char* to_string(access use) noexcept;

}  // namespace memkit::arrays

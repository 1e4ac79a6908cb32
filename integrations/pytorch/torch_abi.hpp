// PyTorch's C++ ABI, reached without PyTorch's headers (this library builds and loads
// without PyTorch): the pieces of it that memkit_torch.cpp needs beyond the
// CUDAPluggableAllocator's setters.
//
// CUDAPluggableAllocator answers cacheInfo (cuDNN's benchmark mode), getDeviceStats
// (torch.cuda.memory_allocated and the rest), resetPeakStats, resetAccumulatedStats and
// the calls of CUDA graph trees (checkPoolLiveAllocations, getCheckpointState) with an
// error, and turns an allocator's exception into a RuntimeError, where PyTorch's
// own allocator raises torch.cuda.OutOfMemoryError. So the allocator object gets a copy
// of its class's vtable with other functions in those methods' slots, and an
// out-of-memory is thrown as PyTorch's c10::OutOfMemoryError.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace memkit::torch_abi {

// c10::CachingDeviceAllocator::DeviceStats (c10/core/CachingDeviceAllocator.h), as of
// PyTorch 2.11: returned by value from getDeviceStats.
struct stat {
  std::int64_t current = 0;
  std::int64_t peak = 0;
  std::int64_t allocated = 0;  // accumulated since the last resetAccumulatedStats
  std::int64_t freed = 0;
};
using stat_array = std::array<stat, 3>;  // all, small pool, large pool
struct device_stats {
  stat_array allocation;  // counts
  stat_array segment;
  stat_array active;
  stat_array inactive_split;
  stat_array allocated_bytes;  // bytes
  stat_array reserved_bytes;
  stat_array active_bytes;
  stat_array inactive_split_bytes;
  stat_array requested_bytes;
  std::int64_t num_alloc_retries = 0;
  std::int64_t num_ooms = 0;
  stat oversize_allocations;
  stat oversize_segments;
  std::int64_t num_sync_all_streams = 0;
  std::int64_t num_device_alloc = 0;
  std::int64_t num_device_free = 0;
  std::int64_t max_split_size = 0;
};
static_assert(sizeof(device_stats) == 976, "the layout of PyTorch 2.11's DeviceStats");

// The PyTorch (major, minor) whose layouts above and vtable order were checked: the
// methods that depend on them (getDeviceStats, and a slot found beside an exported
// method) are replaced on that version only.
inline constexpr std::pair<int, int> kCheckedTorch{2, 11};

// PyTorch's version (major, minor) from the version.py beside the loaded library that
// holds `symbol`; {0, 0} when it cannot be read.
std::pair<int, int> get_torch_version(const void* symbol);

// A method whose vtable slot gets `function`: the slot of the function `name` (mangled,
// exported by a PyTorch library), or the slot `offset` entries from it (for an inline
// method, which no library exports, beside one that is).
struct method {
  const char* name;
  void* function;
  int offset = 0;
};
// Gives `object` a copy of its class's vtable (the data at `vtable`, a _ZTV symbol of a
// loaded library) with the methods' slots replaced; their names are looked up in
// `libraries` (dlopen handles). Returns the names not found (their slots keep
// PyTorch's function). Once only: later calls change nothing and return every name.
std::vector<std::string> override_methods(void* object, const void* vtable,
                                          const std::vector<void*>& libraries,
                                          const std::vector<method>& methods);
// Whether `object`'s vtable is the copy override_methods made.
bool has_overridden_vtable(const void* object);

// Throws c10::OutOfMemoryError (torch.cuda.OutOfMemoryError in Python) with `message`
// when PyTorch's libraries are loaded; returns when they are not, for the caller to throw
// its own error.
void throw_out_of_memory(const std::string& message);

}  // namespace memkit::torch_abi

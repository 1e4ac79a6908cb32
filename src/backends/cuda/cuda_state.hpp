// The cuda backend's state, shared by its files: segments and facts
// (cuda_backend.cpp), streams and fences (cuda_queues.cpp), virtual memory
// (cuda_virtual_memory.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/cuda/driver_api.hpp"
#include "memkit/backends/cuda.hpp"

namespace memkit {

namespace cuda_detail {

// "[memkit::cuda_backend::<function>] <call> failed: <name>: <description>"
[[noreturn]] void throw_cuda_error(const char* function, const char* call, cudaError_t error);

// Makes `device` current for a scope and restores the previous one: backend calls
// may come from threads that use another device.
class device_scope {
 public:
  explicit device_scope(int device);
  ~device_scope();
  device_scope(const device_scope&) = delete;
  device_scope& operator=(const device_scope&) = delete;

 private:
  int previous_ = -1;
  int device_;
};

struct atomic_counters {
  std::atomic<std::uint64_t> segment_allocs{0}, segment_frees{0}, failed_allocs{0};
  std::atomic<std::uint64_t> events_created{0}, events_recorded{0}, event_queries{0}, waits{0},
      orders{0};
  std::atomic<std::uint64_t> pages_created{0}, pages_released{0}, maps{0}, access_sets{0},
      unmaps{0};
};

// One import of another process's memory (cuda_sharing.cpp).
struct import_record {
  std::size_t count = 0;  // imports that returned this address
  bool legacy = false;    // cudaIpcOpenMemHandle (base is the opened segment)
  address_t base = 0;
  std::size_t bytes = 0;                              // virtual: the range reserved
  std::vector<CUmemGenericAllocationHandle> handles;  // virtual: one per piece
  std::string key;                                    // legacy: the IPC handle's bytes
};

// A segment of another process opened with cudaIpcOpenMemHandle, shared by every
// import of a block in it.
struct legacy_open {
  address_t base = 0;
  std::size_t imports = 0;
};

struct pending_fence {
  std::uint64_t value;
  cudaEvent_t event;
};

struct queue_fences {
  std::uint64_t submitted = 0;
  std::uint64_t completed = 0;
  std::deque<pending_fence> pending;  // recorded, not yet seen complete; oldest first
};

}  // namespace cuda_detail

struct cuda_backend::state {
  cuda_options options;
  device_facts facts;
  cuda_memory memory = cuda_memory::device;
  const cuda_detail::driver_api* driver = nullptr;  // set where virtual memory works
  CUmemAllocationProp page_properties{};

  // Who may access mapped virtual memory: the device, then each peer granted
  // (cuda_peers.cpp). `mapped` is every mapping of this backend (arena pages and
  // communication segments), so a new peer's access can be set on them and
  // export_memory knows the physical allocations under a block.
  mutable std::mutex access_mutex;
  std::vector<CUmemAccessDesc> access;
  std::map<address_t, std::size_t> mapped;
  std::map<address_t, CUmemGenericAllocationHandle> communication_segments;
  // Imports of other processes' memory, by the address import_memory returned.
  std::mutex import_mutex;
  std::map<address_t, cuda_detail::import_record> imports;
  std::map<std::string, cuda_detail::legacy_open> legacy_opens;  // by IPC handle bytes

  // Streams by queue; slots [0, stream_count) are set and never change.
  std::unique_ptr<std::atomic<CUstream_st*>[]> streams;
  std::atomic<std::uint32_t> stream_count{1};
  std::mutex register_mutex;

  // Fences. Events go back to the pool once complete, unless a wait may still be
  // synchronizing on one: then they are parked until no wait is in progress.
  mutable std::mutex fence_mutex;
  mutable std::vector<cuda_detail::queue_fences> queues;
  mutable std::vector<cudaEvent_t> event_pool;
  mutable std::vector<cudaEvent_t> parked_events;
  mutable int waits_in_progress = 0;

  mutable cuda_detail::atomic_counters counters;

  void recycle_locked(cudaEvent_t event) const;
  // Pops the completed fences at the front of the queue's pending ones, in order;
  // `function` names the caller in errors.
  void poll_locked(queue_id queue, const char* function) const;
  // The first pending fence of f's queue that covers f; null when f is known
  // complete. Throws invalid_argument, naming `function`, for a fence never submitted.
  const cuda_detail::pending_fence* find_pending_locked(fence f, const char* function) const;
  void destroy_events();

  // Mappings, kept by map/unmap and communication segments (cuda_peers.cpp).
  void note_mapped(address_t at, std::size_t bytes);
  void forget_mapped(address_t at, std::size_t bytes);
  std::vector<CUmemAccessDesc> get_access() const;
  address_t allocate_communication_segment(std::size_t bytes);
  void free_communication_segment(address_t base);

  // Finds the driver and the device's virtual-memory granularity; false when the
  // device or driver cannot do virtual memory (cuda_backend.cpp).
  bool set_up_virtual_memory();
  // Checks that name the backend's function in their errors.
  void check_queue(queue_id queue, const char* function) const;  // cuda_queues.cpp
  // The driver, where virtual memory works (cuda_virtual_memory.cpp).
  const cuda_detail::driver_api& require_driver(const char* function) const;
  void check_driver(const char* function, const char* call, CUresult result) const;
  void check_granular(const char* function, const char* what, std::size_t value) const;
};

}  // namespace memkit

// cuda: an NVIDIA GPU through the CUDA runtime and driver. Segments come from
// cudaMalloc (device memory), cudaMallocManaged or pinned host memory (unified),
// or cudaHostAlloc (pinned host staging buffers; pool them with a memkit::allocator
// over this backend). Virtual memory is the driver's: cuMemAddressReserve,
// cuMemCreate, cuMemMap + cuMemSetAccess, cuMemUnmap, cuMemRelease.
//
// Several GPUs: one backend per device (cuda_options::device). Peer access
// (memkit::peer_access) enables cudaMalloc memory for the accessor's context and
// sets the accessor's access on every mapping of virtual memory, present and future.
// Sharing (memkit::memory_sharing): virtual memory as POSIX file descriptors, one per
// physical allocation (pages must be created exportable), cudaMalloc segments as
// legacy IPC handles (src/backends/cuda/cuda_sharing.cpp).
//
// Queues are streams: queue 0 is the legacy default stream, other streams get a
// queue the first time get_queue sees them. Fences are CUDA events taken from a
// pool, recorded by get_submitted; values increase per queue and complete in order.
//
// Only built where the CUDA toolkit is (MEMKIT_HAVE_CUDA). The driver is reached
// through the runtime's entry points, so programs start on machines without one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>

#include "memkit/backend.hpp"
#include "memkit/capabilities.hpp"
#include "memkit/device_data.hpp"

struct CUstream_st;  // cudaStream_t is CUstream_st*

namespace memkit {

// A CUDA call failed for a reason other than running out of memory.
class cuda_error : public error {
 public:
  using error::error;
};

enum class cuda_memory {
  device,       // cudaMalloc; virtual memory where the device supports it
  unified,      // cudaMallocManaged with concurrent managed access, else pinned host
  pinned_host,  // cudaHostAlloc: host memory the device reads and writes directly
  // Device memory as ncclMemAlloc makes it: each segment one physical allocation,
  // exportable, mapped in an address range of its own with access for the device
  // and every peer granted. NCCL registers any block of it (ncclCommRegister).
  communication,
};

struct cuda_options {
  int device = 0;
  cuda_memory memory = cuda_memory::device;
  std::uint32_t queue_count = 32;  // stream slots, the legacy default stream included
  // Create virtual-memory pages exportable as POSIX file descriptors, so that arena
  // blocks can be shared with other processes (communication memory always is).
  bool exportable = false;
};

// Counters of the calls the backend made, for tests and reports.
struct cuda_counters {
  std::uint64_t segment_allocs = 0;
  std::uint64_t segment_frees = 0;
  std::uint64_t failed_allocs = 0;
  std::uint64_t events_created = 0;  // stays small: events are pooled
  std::uint64_t events_recorded = 0;
  std::uint64_t event_queries = 0;
  std::uint64_t waits = 0;
  std::uint64_t orders = 0;  // cudaStreamWaitEvent calls (order_after)
  std::uint64_t pages_created = 0;
  std::uint64_t pages_released = 0;
  std::uint64_t maps = 0;
  std::uint64_t access_sets = 0;
  std::uint64_t unmaps = 0;
};

// Whether `device` can be used here; `reason` says why not.
struct cuda_availability {
  bool available = false;
  std::string reason;
};
cuda_availability check_cuda_device(int device = 0);

class cuda_backend final : public backend,
                           public device_data,
                           public peer_access,
                           public memory_sharing {
 public:
  // Throws cuda_error when the device cannot be used (check_cuda_device says why).
  explicit cuda_backend(cuda_options options = {});
  ~cuda_backend() override;
  cuda_backend(const cuda_backend&) = delete;
  cuda_backend& operator=(const cuda_backend&) = delete;

  const device_facts& get_facts() const noexcept override;
  address_t allocate_segment(std::size_t bytes) override;
  void free_segment(address_t address, std::size_t bytes) override;
  std::uint64_t get_submitted(queue_id queue) override;
  std::uint64_t get_completed(queue_id queue) const override;
  void wait(fence f) override;
  bool order_after(queue_id queue, fence f) override;
  void* get_host_pointer(address_t address) const override;

  address_t reserve_range(std::size_t bytes) override;
  void release_range(address_t base, std::size_t bytes) override;
  page_id create_page(std::size_t bytes) override;
  void release_page(page_id page, std::size_t bytes) override;
  void map(address_t at, page_id page, std::size_t bytes) override;
  void set_access(address_t at, std::size_t bytes) override;
  void unmap(address_t at, std::size_t bytes) override;

  // Peers: another cuda_backend on a device that cudaDeviceCanAccessPeer allows.
  bool can_grant_access(const backend& accessor) const override;
  void grant_access(backend& accessor) override;

  // Sharing with other processes (memory device or communication only).
  shared_memory export_memory(address_t address, std::size_t bytes) override;
  address_t import_memory(shared_memory& memory) override;
  void close_import(address_t address) override;

  // Transfers and fills, queued on the queue's stream.
  void copy_to_device(address_t dst, const void* src, std::size_t host_bytes, queue_id queue,
                      element_conversion conversion = element_conversion::none) override;
  void copy_to_host(void* dst, address_t src, std::size_t host_bytes, queue_id queue,
                    element_conversion conversion = element_conversion::none) override;
  void fill(address_t dst, std::size_t bytes, std::uint32_t pattern, queue_id queue) override;
  void copy(address_t dst, address_t src, std::size_t bytes, queue_id queue) override;

  // Maps `pages`, each `page_bytes` long, back to back from `at`, then sets access
  // once over the whole span (cuMemSetAccess costs ~30 us a call, cuMemMap ~1 us).
  void map_pages(address_t at, std::span<const page_id> pages, std::size_t page_bytes);

  // The queue of a stream, registered on first sight (cheap once registered).
  // nullptr is the legacy default stream, queue 0. Throws invalid_argument when
  // every slot is taken or for cudaStreamPerThread (it names a different stream
  // on every thread).
  queue_id get_queue(CUstream_st* stream);
  CUstream_st* get_stream(queue_id queue) const;

  // What segments really are: unified falls back to pinned_host without
  // concurrent managed access.
  cuda_memory get_memory() const noexcept;
  int get_device() const noexcept;
  cuda_counters get_counters() const;

 private:
  struct state;
  std::unique_ptr<state> state_;
};

}  // namespace memkit

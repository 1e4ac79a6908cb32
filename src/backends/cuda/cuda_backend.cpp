// The cuda backend: facts and segments. Streams and fences are in cuda_queues.cpp,
// virtual memory in cuda_virtual_memory.cpp.
#include <unistd.h>

#include <cstdio>

#include "backends/cuda/cuda_state.hpp"
#include "common/helpers.hpp"
#include "memkit/errors.hpp"

namespace memkit {

namespace cuda_detail {

void throw_cuda_error(const char* function, const char* call, cudaError_t error) {
  throw cuda_error(std::string("[memkit::cuda_backend::") + function + "] " + call +
                   " failed: " + cudaGetErrorName(error) + ": " + cudaGetErrorString(error));
}

device_scope::device_scope(int device) : device_(device) {
  if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
  if (previous_ != device_) {
    const cudaError_t error = cudaSetDevice(device_);
    if (error != cudaSuccess) throw_cuda_error("device_scope", "cudaSetDevice", error);
  }
}

device_scope::~device_scope() {
  if (previous_ >= 0 && previous_ != device_) cudaSetDevice(previous_);
}

}  // namespace cuda_detail

using cuda_detail::throw_cuda_error;

namespace {

constexpr std::size_t kSegmentGranularity = std::size_t{2} << 20;

std::size_t get_host_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0
             ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page_size)
             : std::size_t{8} << 30;
}

const char* describe(cuda_memory memory) {
  switch (memory) {
    case cuda_memory::device:
      return "";
    case cuda_memory::unified:
      return "/managed";
    case cuda_memory::pinned_host:
      return "/pinned-host";
    case cuda_memory::communication:
      return "/communication";
  }
  return "";
}

}  // namespace

// Finds the driver and the device's virtual-memory granularity; false when the
// device or driver cannot do virtual memory.
bool cuda_backend::state::set_up_virtual_memory() {
  std::string why;
  const cuda_detail::driver_api* api = cuda_detail::get_driver_api(&why);
  if (!api) return false;
  int supported = 0;
  if (api->device_get_attribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                options.device) != CUDA_SUCCESS ||
      !supported) {
    return false;
  }
  page_properties.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  page_properties.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  page_properties.location.id = options.device;
  if (options.exportable || memory == cuda_memory::communication) {
    page_properties.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  }
  std::size_t granularity = 0;
  if (api->mem_get_allocation_granularity(&granularity, &page_properties,
                                          CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) != CUDA_SUCCESS ||
      granularity == 0) {
    return false;
  }
  CUmemAccessDesc own{};
  own.location = page_properties.location;
  own.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  access.assign(1, own);
  facts.granularity = common::round_up(kSegmentGranularity, granularity);
  driver = api;
  return true;
}

cuda_availability check_cuda_device(int device) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();
    return {false, std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(error) + ": " +
                       cudaGetErrorString(error)};
  }
  if (count == 0) return {false, "no CUDA device"};
  if (device < 0 || device >= count) {
    return {false, "CUDA device " + std::to_string(device) + " does not exist; there are " +
                       std::to_string(count)};
  }
  return {true, ""};
}

cuda_backend::cuda_backend(cuda_options options) : state_(std::make_unique<state>()) {
  state& s = *state_;
  s.options = options;
  if (options.queue_count == 0) {
    throw invalid_argument("[memkit::cuda_backend] queue_count must be at least 1");
  }
  const cuda_availability availability = check_cuda_device(options.device);
  if (!availability.available) throw cuda_error("[memkit::cuda_backend] " + availability.reason);
  cuda_detail::device_scope scope(options.device);

  s.memory = options.memory;
  if (s.memory == cuda_memory::unified) {
    int concurrent = 0;
    cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, options.device);
    if (!concurrent) s.memory = cuda_memory::pinned_host;
  }

  std::size_t free_bytes = 0, total_bytes = 0;
  const cudaError_t error = cudaMemGetInfo(&free_bytes, &total_bytes);
  if (error != cudaSuccess) throw_cuda_error("cuda_backend", "cudaMemGetInfo", error);

  device_facts& f = s.facts;
  f.name = "cuda:" + std::to_string(options.device) + describe(options.memory);
  f.capacity = s.memory == cuda_memory::pinned_host ? get_host_memory() : total_bytes;
  f.granularity = kSegmentGranularity;
  f.max_buffer = f.capacity;
  f.alignment = 256;  // cudaMalloc's guarantee; blocks are 512-byte multiples anyway
  f.max_wired = f.capacity;
  f.queue_count = options.queue_count;
  f.queue_ordering = options.queue_count > 1;
  f.unified = s.memory == cuda_memory::unified || s.memory == cuda_memory::pinned_host;
  const bool mapped_memory =
      s.memory == cuda_memory::device || s.memory == cuda_memory::communication;
  const bool virtual_memory = mapped_memory && s.set_up_virtual_memory();
  if (s.memory == cuda_memory::communication && !virtual_memory) {
    throw cuda_error(
        "[memkit::cuda_backend] communication memory needs virtual memory management, "
        "which " +
        f.name + " lacks");
  }
  // Communication memory maps each segment itself: the allocator sees segments.
  f.virtual_memory = s.memory == cuda_memory::device && virtual_memory;

  s.streams = std::make_unique<std::atomic<CUstream_st*>[]>(options.queue_count);
  for (std::uint32_t q = 0; q < options.queue_count; ++q) s.streams[q].store(nullptr);
  s.queues.resize(options.queue_count);
}

cuda_backend::~cuda_backend() { state_->destroy_events(); }

const device_facts& cuda_backend::get_facts() const noexcept { return state_->facts; }
cuda_memory cuda_backend::get_memory() const noexcept { return state_->memory; }
int cuda_backend::get_device() const noexcept { return state_->options.device; }

address_t cuda_backend::allocate_segment(std::size_t bytes) {
  state& s = *state_;
  cuda_detail::device_scope scope(s.options.device);
  void* pointer = nullptr;
  cudaError_t error = cudaSuccess;
  switch (s.memory) {
    case cuda_memory::device:
      error = cudaMalloc(&pointer, bytes);
      break;
    case cuda_memory::unified:
      error = cudaMallocManaged(&pointer, bytes, cudaMemAttachGlobal);
      break;
    case cuda_memory::pinned_host:
      error = cudaHostAlloc(&pointer, bytes, cudaHostAllocPortable | cudaHostAllocMapped);
      break;
    case cuda_memory::communication:
      return s.allocate_communication_segment(bytes);
  }
  if (error == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it so the next kernel check does not see it
    s.counters.failed_allocs++;
    return 0;
  }
  if (error != cudaSuccess) throw_cuda_error("allocate_segment", "allocating a segment", error);
  s.counters.segment_allocs++;
  return reinterpret_cast<address_t>(pointer);
}

void cuda_backend::free_segment(address_t address, std::size_t) {
  state& s = *state_;
  if (s.memory == cuda_memory::communication) {
    s.free_communication_segment(address);
    return;
  }
  void* pointer = reinterpret_cast<void*>(address);
  const cudaError_t error =
      s.memory == cuda_memory::pinned_host ? cudaFreeHost(pointer) : cudaFree(pointer);
  s.counters.segment_frees++;
  // Called from destructors: report rather than throw. At process exit the
  // runtime may already be gone, and the memory with it.
  if (error != cudaSuccess && error != cudaErrorCudartUnloading) {
    std::fprintf(stderr, "[memkit::cuda_backend::free_segment] freeing %p failed: %s\n", pointer,
                 cudaGetErrorName(error));
  }
}

void* cuda_backend::get_host_pointer(address_t address) const {
  return state_->facts.unified ? reinterpret_cast<void*>(address) : nullptr;
}

cuda_counters cuda_backend::get_counters() const {
  const cuda_detail::atomic_counters& c = state_->counters;
  return {c.segment_allocs.load(),
          c.segment_frees.load(),
          c.failed_allocs.load(),
          c.events_created.load(),
          c.events_recorded.load(),
          c.event_queries.load(),
          c.waits.load(),
          c.orders.load(),
          c.pages_created.load(),
          c.pages_released.load(),
          c.maps.load(),
          c.access_sets.load(),
          c.unmaps.load()};
}

}  // namespace memkit

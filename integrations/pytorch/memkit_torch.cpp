// memkit as PyTorch's CUDA allocator, through torch.cuda.memory.CUDAPluggableAllocator:
//
//   alloc = torch.cuda.memory.CUDAPluggableAllocator(
//       "libmemkit_torch.so", "memkit_torch_malloc", "memkit_torch_free")
//   torch.cuda.memory.change_current_allocator(alloc)  # before any CUDA allocation
//
// One memkit::allocator over a cuda_backend per device, made on first use. Streams
// become the backend's queues, so a block freed on a stream is reused at once on
// that stream and on others only once the stream's work has completed.
// Statistics are read with ctypes (memkit_torch_get_statistics; see train_compare.py).
//
// The Python package's memkit.torch, memkit.cupy and memkit.numba use this library
// too, through the functions below that return a memkit_status and never throw
// (memkit_torch_last_error() gives the calling thread's message): one allocator per
// device for every framework in the process.
//
// The names carry a `_torch` suffix: memkit_malloc/memkit_free would clash with the C
// API of include/memkit/memkit.h.
#include <cuda_runtime_api.h>
#include <sys/types.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>

#include "memkit/allocator.hpp"
#include "memkit/backends/cuda.hpp"
#include "memkit/capi.hpp"
#include "memkit/memkit.h"

#define MEMKIT_TORCH_API extern "C" __attribute__((visibility("default")))

namespace {

constexpr int kMaxDevices = 64;

// MEMKIT_POLICY (automatic | segments | arena), MEMKIT_ARENA_SLACK (a fraction, e.g.
// 0.02) and MEMKIT_PLAN_LOOPS (0 | 1) choose the allocator's options, as memkit
// replay's --policy, --arena-slack and --plan-loops do; a bad value is an error naming the
// variable.
memkit::allocator_options get_options_from_environment() {
  memkit::allocator_options options;
  if (const char* policy = std::getenv("MEMKIT_POLICY")) {
    const std::string name = policy;
    if (name == "automatic") {
      options.policy = memkit::pool_policy::automatic;
    } else if (name == "segments") {
      options.policy = memkit::pool_policy::segments;
    } else if (name == "arena") {
      options.policy = memkit::pool_policy::arena;
    } else {
      throw memkit::invalid_argument("[memkit::torch_malloc] MEMKIT_POLICY='" + name +
                                     "': expected automatic, segments or arena");
    }
  }
  if (const char* slack = std::getenv("MEMKIT_ARENA_SLACK")) {
    char* end = nullptr;
    const double value = std::strtod(slack, &end);
    if (end == slack || *end != '\0' || !(value >= 0.0 && value <= 10.0)) {
      throw memkit::invalid_argument("[memkit::torch_malloc] MEMKIT_ARENA_SLACK='" +
                                     std::string(slack) + "': expected a fraction from 0 to 10");
    }
    options.arena_slack = value;
  }
  if (const char* plan = std::getenv("MEMKIT_PLAN_LOOPS")) {
    const std::string value = plan;
    if (value != "0" && value != "1") {
      throw memkit::invalid_argument("[memkit::torch_malloc] MEMKIT_PLAN_LOOPS='" + value +
                                     "': expected 0 or 1");
    }
    options.plan_loops = value == "1";
  }
  return options;
}

// MEMKIT_RECORD=PATH: each device's allocator records its calls to PATH (device 0)
// or PATH.<device> (others), as memkit traces that memkit replay reads.
std::string get_record_path(int device) {
  const char* path = std::getenv("MEMKIT_RECORD");
  if (!path || !*path) return {};
  return device == 0 ? std::string(path) : std::string(path) + "." + std::to_string(device);
}

// Options set by memkit_torch_configure, in place of the environment's; guarded by
// create_mutex.
std::optional<memkit::allocator_options> configured_options;

memkit::allocator_options get_options(int device) {
  memkit::allocator_options options =
      configured_options ? *configured_options : get_options_from_environment();
  if (options.record_path.empty()) options.record_path = get_record_path(device);
  return options;
}

struct device_allocator {
  explicit device_allocator(int device)
      : backend(memkit::cuda_options{.device = device}), allocator(backend, get_options(device)) {}
  memkit::cuda_backend backend;
  memkit::allocator allocator;
};

std::array<std::atomic<device_allocator*>, kMaxDevices> devices{};
std::mutex create_mutex;

// MEMKIT_TORCH_TIMING=1: the time spent inside malloc and free, for telling memkit's
// own cost from the rest of a step (memkit_torch_get_call_time).
const bool timing = [] {
  const char* v = std::getenv("MEMKIT_TORCH_TIMING");
  return v && std::string(v) == "1";
}();
std::atomic<std::uint64_t> call_ns{0};
std::atomic<std::uint64_t> calls{0};

struct call_timer {
  std::chrono::steady_clock::time_point start;
  call_timer() {
    if (timing) [[unlikely]]
      start = std::chrono::steady_clock::now();
  }
  ~call_timer() {
    if (!timing) [[likely]]
      return;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now() - start);
    call_ns.fetch_add(static_cast<std::uint64_t>(ns.count()), std::memory_order_relaxed);
    calls.fetch_add(1, std::memory_order_relaxed);
  }
};

// Made once and never destroyed: PyTorch frees tensors during interpreter exit, after
// static destructors and the CUDA runtime's teardown may have run.
device_allocator& get_device_allocator(int device, const char* function) {
  if (device < 0 || device >= kMaxDevices) [[unlikely]] {
    throw memkit::invalid_argument(std::string("[memkit::") + function + "] device " +
                                   std::to_string(device) + " is outside 0.." +
                                   std::to_string(kMaxDevices - 1));
  }
  if (device_allocator* d = devices[device].load(std::memory_order_acquire)) [[likely]] {
    return *d;
  }
  std::lock_guard lock(create_mutex);
  device_allocator* d = devices[device].load(std::memory_order_relaxed);
  if (!d) {
    d = new device_allocator(device);
    devices[device].store(d, std::memory_order_release);
  }
  return *d;
}

}  // namespace

// Throws memkit::out_of_memory when nothing can make room (a memkit::error, so a
// std::runtime_error: PyTorch raises it as a RuntimeError with memkit's message).
MEMKIT_TORCH_API void* memkit_torch_malloc(ssize_t size, int device, cudaStream_t stream) {
  const call_timer timer;
  device_allocator& d = get_device_allocator(device, "torch_malloc");
  const memkit::queue_id queue = d.backend.get_queue(stream);
  return reinterpret_cast<void*>(
      d.allocator.allocate(static_cast<std::size_t>(size), queue).address);
}

MEMKIT_TORCH_API void memkit_torch_free(void* pointer, ssize_t, int device, cudaStream_t) {
  const call_timer timer;
  get_device_allocator(device, "torch_free")
      .allocator.free(reinterpret_cast<memkit::address_t>(pointer));
}

// The block is also used on `stream` (like Tensor.record_stream): its reuse after
// free waits for the work queued there by then.
MEMKIT_TORCH_API void memkit_torch_record_stream(void* pointer, int device, cudaStream_t stream) {
  device_allocator& d = get_device_allocator(device, "torch_record_stream");
  d.allocator.record_use(reinterpret_cast<memkit::address_t>(pointer), d.backend.get_queue(stream));
}

// 0 and the statistics of `device`; -1 (out untouched) when memkit has not been used there.
MEMKIT_TORCH_API int memkit_torch_get_statistics(int device, memkit_statistics* out) {
  if (device < 0 || device >= kMaxDevices) return -1;
  device_allocator* d = devices[device].load(std::memory_order_acquire);
  if (!d) return -1;
  *out = memkit::capi::to_c_statistics(d->allocator.get_statistics());
  return 0;
}

// With MEMKIT_TORCH_TIMING=1: nanoseconds spent inside malloc and free, and calls, so far.
MEMKIT_TORCH_API void memkit_torch_get_call_time(std::uint64_t* ns, std::uint64_t* count) {
  *ns = call_ns.load(std::memory_order_relaxed);
  *count = calls.load(std::memory_order_relaxed);
}

namespace {

thread_local std::string last_error;
// The details of this thread's last out-of-memory (memkit_torch_allocate).
thread_local memkit::out_of_memory::details last_out_of_memory;

// Runs f; a failure becomes a status and this thread's last error.
template <class F>
int guarded(F&& f) noexcept {
  return memkit::capi::run_guarded(
      [&] {
        f();
        last_error.clear();
      },
      [](const memkit::capi::failure& failed) {
        if (failed.status == MEMKIT_OUT_OF_MEMORY) last_out_of_memory = failed.details;
        last_error = failed.message;
      });
}

// The allocator of a device in use; an error naming the function where it is not.
device_allocator& get_used_device_allocator(int device, const char* function) {
  if (device >= 0 && device < kMaxDevices) {
    if (device_allocator* d = devices[device].load(std::memory_order_acquire)) return *d;
  }
  throw memkit::invalid_argument(std::string("[") + function +
                                 "] memkit has not allocated on device " + std::to_string(device));
}

}  // namespace

MEMKIT_TORCH_API int memkit_torch_reset_peak(int device) {
  return guarded([&] { get_device_allocator(device, "torch_reset_peak").allocator.reset_peak(); });
}

// Gives every cached segment back to CUDA.
MEMKIT_TORCH_API int memkit_torch_empty_cache(int device) {
  return guarded(
      [&] { get_device_allocator(device, "torch_empty_cache").allocator.clear_cache(); });
}

// The message of this thread's last failed call below; "" after a success.
MEMKIT_TORCH_API const char* memkit_torch_last_error(void) { return last_error.c_str(); }

// Options for every device's allocator, in place of the environment variables; only
// before the first allocation on any device (MEMKIT_INVALID_ARGUMENT after it).
MEMKIT_TORCH_API int memkit_torch_configure(const memkit_allocator_options* options) {
  return guarded([&] {
    const char* function = "memkit_torch_configure";
    if (!options) throw memkit::invalid_argument(std::string("[") + function + "] options is NULL");
    const memkit::allocator_options converted = memkit::capi::to_options(*options, function);
    std::lock_guard lock(create_mutex);
    for (int device = 0; device < kMaxDevices; ++device) {
      if (devices[device].load(std::memory_order_relaxed)) {
        throw memkit::invalid_argument(
            std::string("[") + function + "] memkit has already allocated on device " +
            std::to_string(device) + ": configure before the first CUDA allocation");
      }
    }
    configured_options = converted;
  });
}

// 1 when memkit has allocated on the device (its allocator exists), else 0.
MEMKIT_TORCH_API int memkit_torch_is_used(int device) {
  return device >= 0 && device < kMaxDevices &&
         devices[device].load(std::memory_order_acquire) != nullptr;
}

// memkit_torch_malloc for other callers (CuPy, Numba): a status, the block in *out.
MEMKIT_TORCH_API int memkit_torch_allocate(int device, size_t bytes, void* stream, void** out) {
  return guarded([&] {
    *out = nullptr;
    device_allocator& d = get_device_allocator(device, "torch_allocate");
    const memkit::queue_id queue = d.backend.get_queue(static_cast<cudaStream_t>(stream));
    *out = reinterpret_cast<void*>(d.allocator.allocate(bytes, queue).address);
  });
}

MEMKIT_TORCH_API int memkit_torch_deallocate(int device, void* pointer) {
  return guarded([&] {
    get_device_allocator(device, "torch_deallocate")
        .allocator.free(reinterpret_cast<memkit::address_t>(pointer));
  });
}

// The details of this thread's last MEMKIT_OUT_OF_MEMORY: requested, active, cached,
// reserved bytes, the limit and the largest free block.
MEMKIT_TORCH_API void memkit_torch_get_out_of_memory_details(size_t out[6]) {
  const memkit::out_of_memory::details& d = last_out_of_memory;
  const size_t values[6] = {d.requested_bytes, d.reserved_bytes - d.cached_bytes,
                            d.cached_bytes,    d.reserved_bytes,
                            d.limit_bytes,     d.largest_free_bytes};
  for (int i = 0; i < 6; ++i) out[i] = values[i];
}

// The names of the statistics, comma-separated, in the order of
// memkit_torch_get_statistics_array (and of memkit_statistics).
MEMKIT_TORCH_API const char* memkit_torch_statistics_fields(void) {
  static const std::string names = [] {
    std::string joined;
    for (const auto& field : memkit::capi::statistics_fields) {
      if (!joined.empty()) joined += ',';
      joined += field.name;
    }
    return joined;
  }();
  return names.c_str();
}

// The statistics of a device as `count` numbers (count: the number of fields).
MEMKIT_TORCH_API int memkit_torch_get_statistics_array(int device, std::uint64_t* out,
                                                       size_t count) {
  return guarded([&] {
    const char* function = "memkit_torch_get_statistics_array";
    if (count != memkit::capi::statistics_fields.size()) {
      throw memkit::invalid_argument(std::string("[") + function + "] count " +
                                     std::to_string(count) + ", the fields are " +
                                     std::to_string(memkit::capi::statistics_fields.size()));
    }
    const memkit::statistics s =
        get_used_device_allocator(device, function).allocator.get_statistics();
    for (size_t i = 0; i < count; ++i) out[i] = memkit::capi::statistics_fields[i].get(s);
  });
}

// Limits of a device's allocator (made here when memkit has not allocated there yet).
// The setters give the previous value in *previous (may be NULL).
MEMKIT_TORCH_API int memkit_torch_set_memory_limit(int device, size_t bytes, size_t* previous) {
  return guarded([&] {
    const size_t p =
        get_device_allocator(device, "torch_set_memory_limit").allocator.set_memory_limit(bytes);
    if (previous) *previous = p;
  });
}

MEMKIT_TORCH_API int memkit_torch_set_cache_limit(int device, size_t bytes, size_t* previous) {
  return guarded([&] {
    const size_t p =
        get_device_allocator(device, "torch_set_cache_limit").allocator.set_cache_limit(bytes);
    if (previous) *previous = p;
  });
}

MEMKIT_TORCH_API int memkit_torch_get_memory_limit(int device, size_t* out) {
  return guarded([&] {
    *out = get_device_allocator(device, "torch_get_memory_limit").allocator.get_memory_limit();
  });
}

MEMKIT_TORCH_API int memkit_torch_get_cache_limit(int device, size_t* out) {
  return guarded([&] {
    *out = get_device_allocator(device, "torch_get_cache_limit").allocator.get_cache_limit();
  });
}

// The device's segments and blocks (memkit_snapshot of memkit.h); release it with
// memkit_torch_snapshot_destroy.
MEMKIT_TORCH_API int memkit_torch_snapshot_create(int device, memkit_snapshot** out) {
  return guarded([&] {
    *out = nullptr;
    *out = memkit::capi::make_c_snapshot(
        get_used_device_allocator(device, "memkit_torch_snapshot_create")
            .allocator.calculate_segments());
  });
}

MEMKIT_TORCH_API void memkit_torch_snapshot_destroy(memkit_snapshot* snapshot) {
  memkit::capi::destroy_c_snapshot(snapshot);
}

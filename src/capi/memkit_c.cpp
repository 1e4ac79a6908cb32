// The C API: exceptions become status codes (memkit::capi::get_current_failure) and a
// thread-local message.
#include <cmath>
#include <new>
#include <string>
#include <vector>

#include "memkit/capi.hpp"
#include "memkit/memkit.h"
#include "memkit/memkit.hpp"
#include "memkit/version.hpp"
#if MEMKIT_HAVE_CUDA
#include "memkit/backends/cuda.hpp"
#endif
#if MEMKIT_HAVE_VULKAN
#include "memkit/backends/vulkan.hpp"
#endif

struct memkit_backend {
  std::unique_ptr<memkit::backend> impl;
};
struct memkit_allocator {
  memkit::allocator impl;
};

namespace {

thread_local std::string last_error;

void set_last_error(const char* message) noexcept {
  try {
    last_error = message;
  } catch (...) {
    last_error.clear();  // no memory for the message: an empty one rather than a stale one
  }
}

// Runs f; a success clears the thread's last error, a failure sets it.
template <class F>
memkit_status guarded(F&& f) noexcept {
  return memkit::capi::run_guarded(
      [&] {
        f();
        last_error.clear();
      },
      [](const memkit::capi::failure& failed) { set_last_error(failed.message); });
}

// A NULL handle or output pointer is an invalid argument, named with its function.
void require(const void* pointer, const char* function, const char* name) {
  if (!pointer) {
    throw memkit::invalid_argument(std::string("[") + function + "] " + name + " is NULL");
  }
}

// One limit's getter: checks both pointers, names the C function in errors.
memkit_status get_limit(const memkit_allocator* allocator, size_t* out, const char* function,
                        std::size_t (memkit::allocator::*getter)() const) {
  return guarded([&] {
    require(allocator, function, "allocator");
    require(out, function, "out");
    *out = (allocator->impl.*getter)();
  });
}
}  // namespace

extern "C" {

const char* memkit_version(void) {
  last_error.clear();
  return memkit::version_string;
}

memkit_backend* memkit_cpu_backend_create(void) {
  memkit_backend* backend = nullptr;
  guarded([&] { backend = new memkit_backend{std::make_unique<memkit::cpu_backend>()}; });
  return backend;
}

memkit_backend* memkit_sim_backend_create(size_t capacity, size_t granularity) {
  memkit_backend* backend = nullptr;
  guarded([&] {
    memkit::sim_options options;
    if (capacity) options.capacity = capacity;
    if (granularity) options.granularity = granularity;
    backend = new memkit_backend{std::make_unique<memkit::sim_backend>(options)};
  });
  return backend;
}

memkit_status memkit_cuda_backend_create(int device, memkit_cuda_memory memory,
                                         memkit_backend** out) {
  return guarded([&] {
    require(out, "memkit_cuda_backend_create", "out");
    *out = nullptr;
#if MEMKIT_HAVE_CUDA
    memkit::cuda_options options;
    options.device = device;
    switch (memory) {
      case MEMKIT_CUDA_DEVICE:
        options.memory = memkit::cuda_memory::device;
        break;
      case MEMKIT_CUDA_MANAGED:
        options.memory = memkit::cuda_memory::unified;
        break;
      case MEMKIT_CUDA_PINNED_HOST:
        options.memory = memkit::cuda_memory::pinned_host;
        break;
      default:
        throw memkit::invalid_argument("[memkit_cuda_backend_create] memory " +
                                       std::to_string(static_cast<int>(memory)) +
                                       " is not a memkit_cuda_memory");
    }
    const memkit::cuda_availability availability = memkit::check_cuda_device(device);
    if (!availability.available) {
      throw memkit::unavailable("[memkit_cuda_backend_create] " + availability.reason);
    }
    *out = new memkit_backend{std::make_unique<memkit::cuda_backend>(options)};
#else
    (void)device;
    (void)memory;
    throw memkit::unavailable(
        "[memkit_cuda_backend_create] this build of memkit has no CUDA backend");
#endif
  });
}

memkit_status memkit_vulkan_backend_create(int device_index, int webgpu_compatible,
                                           memkit_backend** out) {
  return guarded([&] {
    require(out, "memkit_vulkan_backend_create", "out");
    *out = nullptr;
#if MEMKIT_HAVE_VULKAN
    memkit::vulkan_options options;
    options.device_index = device_index;
    options.webgpu_compatible = webgpu_compatible != 0;
    try {
      *out = new memkit_backend{std::make_unique<memkit::vulkan_backend>(options)};
    } catch (const memkit::vulkan_unavailable& e) {
      throw memkit::unavailable(std::string("[memkit_vulkan_backend_create] ") + e.what());
    }
#else
    (void)device_index;
    (void)webgpu_compatible;
    throw memkit::unavailable(
        "[memkit_vulkan_backend_create] this build of memkit has no Vulkan backend");
#endif
  });
}

void memkit_backend_destroy(memkit_backend* backend) {
  guarded([&] { delete backend; });
}

memkit_status memkit_allocator_options_init(memkit_allocator_options* options) {
  return guarded([&] {
    require(options, "memkit_allocator_options_init", "options");
    const memkit::allocator_options defaults;
    *options = memkit_allocator_options{
        MEMKIT_POLICY_AUTOMATIC, defaults.memory_limit, defaults.cache_limit,
        defaults.wired_limit,    defaults.arena_slack,  defaults.validate,
        defaults.thread_cache,   defaults.plan_loops,   defaults.order_queues};
  });
}

memkit_allocator* memkit_allocator_create(memkit_backend* backend) {
  memkit_allocator* allocator = nullptr;
  guarded([&] {
    require(backend, "memkit_allocator_create", "backend");
    allocator = new memkit_allocator{memkit::allocator(*backend->impl)};
  });
  return allocator;
}

memkit_status memkit_allocator_create_with_options(memkit_backend* backend,
                                                   const memkit_allocator_options* options,
                                                   memkit_allocator** out) {
  return guarded([&] {
    require(out, "memkit_allocator_create_with_options", "out");
    *out = nullptr;
    require(backend, "memkit_allocator_create_with_options", "backend");
    const memkit::allocator_options converted =
        options ? memkit::capi::to_options(*options, "memkit_allocator_create_with_options")
                : memkit::allocator_options{};
    *out = new memkit_allocator{memkit::allocator(*backend->impl, converted)};
  });
}

void memkit_allocator_destroy(memkit_allocator* allocator) {
  guarded([&] { delete allocator; });
}

memkit_status memkit_allocate(memkit_allocator* allocator, size_t bytes, uint32_t queue,
                              uint64_t* address, size_t* size) {
  return guarded([&] {
    require(allocator, "memkit_allocate", "allocator");
    require(address, "memkit_allocate", "address");
    const memkit::allocation a = allocator->impl.allocate(bytes, queue);
    *address = a.address;
    if (size) *size = a.size;
  });
}

memkit_status memkit_free(memkit_allocator* allocator, uint64_t address) {
  return guarded([&] {
    require(allocator, "memkit_free", "allocator");
    allocator->impl.free(address);
  });
}

memkit_status memkit_record_use(memkit_allocator* allocator, uint64_t address, uint32_t queue) {
  return guarded([&] {
    require(allocator, "memkit_record_use", "allocator");
    allocator->impl.record_use(address, queue);
  });
}

size_t memkit_set_memory_limit(memkit_allocator* allocator, size_t bytes) {
  size_t previous = 0;
  guarded([&] {
    require(allocator, "memkit_set_memory_limit", "allocator");
    previous = allocator->impl.set_memory_limit(bytes);
  });
  return previous;
}

size_t memkit_set_cache_limit(memkit_allocator* allocator, size_t bytes) {
  size_t previous = 0;
  guarded([&] {
    require(allocator, "memkit_set_cache_limit", "allocator");
    previous = allocator->impl.set_cache_limit(bytes);
  });
  return previous;
}

memkit_status memkit_set_wired_limit(memkit_allocator* allocator, size_t bytes, size_t* previous) {
  return guarded([&] {
    require(allocator, "memkit_set_wired_limit", "allocator");
    const size_t p = allocator->impl.set_wired_limit(bytes);
    if (previous) *previous = p;
  });
}

memkit_status memkit_get_memory_limit(const memkit_allocator* allocator, size_t* out) {
  return get_limit(allocator, out, "memkit_get_memory_limit", &memkit::allocator::get_memory_limit);
}

memkit_status memkit_get_cache_limit(const memkit_allocator* allocator, size_t* out) {
  return get_limit(allocator, out, "memkit_get_cache_limit", &memkit::allocator::get_cache_limit);
}

memkit_status memkit_get_wired_limit(const memkit_allocator* allocator, size_t* out) {
  return get_limit(allocator, out, "memkit_get_wired_limit", &memkit::allocator::get_wired_limit);
}

memkit_status memkit_get_statistics(const memkit_allocator* allocator, memkit_statistics* out) {
  return guarded([&] {
    require(allocator, "memkit_get_statistics", "allocator");
    require(out, "memkit_get_statistics", "out");
    *out = memkit::capi::to_c_statistics(allocator->impl.get_statistics());
  });
}

memkit_status memkit_reset_peak(memkit_allocator* allocator) {
  return guarded([&] {
    require(allocator, "memkit_reset_peak", "allocator");
    allocator->impl.reset_peak();
  });
}

memkit_status memkit_start_recording(memkit_allocator* allocator, const char* path) {
  return guarded([&] {
    require(allocator, "memkit_start_recording", "allocator");
    require(path, "memkit_start_recording", "path");
    allocator->impl.start_recording(path);
  });
}

memkit_status memkit_stop_recording(memkit_allocator* allocator, uint64_t* events) {
  return guarded([&] {
    require(allocator, "memkit_stop_recording", "allocator");
    const std::uint64_t written = allocator->impl.stop_recording();
    if (events) *events = written;
  });
}

memkit_status memkit_clear_cache(memkit_allocator* allocator) {
  return guarded([&] {
    require(allocator, "memkit_clear_cache", "allocator");
    allocator->impl.clear_cache();
  });
}

memkit_status memkit_snapshot_create(const memkit_allocator* allocator, memkit_snapshot** out) {
  return guarded([&] {
    require(out, "memkit_snapshot_create", "out");
    *out = nullptr;
    require(allocator, "memkit_snapshot_create", "allocator");
    *out = memkit::capi::make_c_snapshot(allocator->impl.calculate_segments());
  });
}

void memkit_snapshot_destroy(memkit_snapshot* snapshot) {
  memkit::capi::destroy_c_snapshot(snapshot);
}

const char* memkit_last_error(void) { return last_error.c_str(); }

}  // extern "C"

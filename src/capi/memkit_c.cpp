// The C API: exceptions become status codes and a thread-local message.
#include <new>
#include <string>

#include "capi/c_statistics.hpp"
#include "memkit/memkit.h"
#include "memkit/memkit.hpp"

struct memkit_backend {
  std::unique_ptr<memkit::backend> impl;
};
struct memkit_allocator {
  memkit::allocator impl;
};

namespace {

thread_local std::string last_error;

template <class F>
memkit_status guarded(F&& f) {
  try {
    f();
    return MEMKIT_OK;
  } catch (const memkit::out_of_memory& e) {
    last_error = e.what();
    return MEMKIT_OUT_OF_MEMORY;
  } catch (const std::invalid_argument& e) {
    last_error = e.what();
    return MEMKIT_INVALID_ARGUMENT;
  } catch (const std::bad_alloc&) {
    last_error = "[memkit] the host ran out of memory";
    return MEMKIT_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    last_error = e.what();
    return MEMKIT_INTERNAL_ERROR;
  }
}

// A NULL handle or output pointer is an invalid argument, named with its function.
void require(const void* pointer, const char* function, const char* name) {
  if (!pointer) {
    throw memkit::invalid_argument(std::string("[") + function + "] " + name + " is NULL");
  }
}

}  // namespace

extern "C" {

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

void memkit_backend_destroy(memkit_backend* backend) { delete backend; }

memkit_allocator* memkit_allocator_create(memkit_backend* backend) {
  memkit_allocator* allocator = nullptr;
  guarded([&] {
    require(backend, "memkit_allocator_create", "backend");
    allocator = new memkit_allocator{memkit::allocator(*backend->impl)};
  });
  return allocator;
}

void memkit_allocator_destroy(memkit_allocator* allocator) { delete allocator; }

memkit_status memkit_allocate(memkit_allocator* allocator, size_t bytes, uint32_t queue,
                              uint64_t* address, size_t* size) {
  return guarded([&] {
    require(allocator, "memkit_allocate", "allocator");
    const memkit::allocation a = allocator->impl.allocate(bytes, queue);
    if (address) *address = a.address;
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

memkit_status memkit_clear_cache(memkit_allocator* allocator) {
  return guarded([&] {
    require(allocator, "memkit_clear_cache", "allocator");
    allocator->impl.clear_cache();
  });
}

const char* memkit_last_error(void) { return last_error.c_str(); }

}  // extern "C"

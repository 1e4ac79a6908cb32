// The C API: exceptions become status codes and a thread-local message.
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
  } catch (const std::exception& e) {
    last_error = e.what();
    return MEMKIT_INTERNAL_ERROR;
  }
}

}  // namespace

extern "C" {

memkit_backend* memkit_cpu_backend_create(void) {
  return new memkit_backend{std::make_unique<memkit::cpu_backend>()};
}

memkit_backend* memkit_sim_backend_create(size_t capacity, size_t granularity) {
  memkit::sim_options options;
  if (capacity) options.capacity = capacity;
  if (granularity) options.granularity = granularity;
  return new memkit_backend{std::make_unique<memkit::sim_backend>(options)};
}

void memkit_backend_destroy(memkit_backend* backend) { delete backend; }

memkit_allocator* memkit_allocator_create(memkit_backend* backend) {
  if (!backend) {
    last_error = "[memkit_allocator_create] backend is NULL";
    return nullptr;
  }
  return new memkit_allocator{memkit::allocator(*backend->impl)};
}

void memkit_allocator_destroy(memkit_allocator* allocator) { delete allocator; }

memkit_status memkit_allocate(memkit_allocator* allocator, size_t bytes, uint32_t queue,
                              uint64_t* address, size_t* size) {
  return guarded([&] {
    const memkit::allocation a = allocator->impl.allocate(bytes, queue);
    if (address) *address = a.address;
    if (size) *size = a.size;
  });
}

memkit_status memkit_free(memkit_allocator* allocator, uint64_t address) {
  return guarded([&] { allocator->impl.free(address); });
}

memkit_status memkit_record_use(memkit_allocator* allocator, uint64_t address, uint32_t queue) {
  return guarded([&] { allocator->impl.record_use(address, queue); });
}

size_t memkit_set_memory_limit(memkit_allocator* allocator, size_t bytes) {
  return allocator->impl.set_memory_limit(bytes);
}

size_t memkit_set_cache_limit(memkit_allocator* allocator, size_t bytes) {
  return allocator->impl.set_cache_limit(bytes);
}

memkit_status memkit_set_wired_limit(memkit_allocator* allocator, size_t bytes, size_t* previous) {
  return guarded([&] {
    const size_t p = allocator->impl.set_wired_limit(bytes);
    if (previous) *previous = p;
  });
}

void memkit_get_statistics(const memkit_allocator* allocator, memkit_statistics* out) {
  *out = memkit::capi::to_c_statistics(allocator->impl.get_statistics());
}

void memkit_reset_peak(memkit_allocator* allocator) { allocator->impl.reset_peak(); }
void memkit_clear_cache(memkit_allocator* allocator) { allocator->impl.clear_cache(); }

const char* memkit_last_error(void) { return last_error.c_str(); }

}  // extern "C"

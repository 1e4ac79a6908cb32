// Allocate, free and read statistics on the default (cpu) backend.
#include <cstdio>

#include "memkit/memkit.hpp"

int main() {
  memkit::cpu_backend device;
  memkit::allocator alloc(device);
  const memkit::allocation a = alloc.allocate(6000);
  const memkit::allocation b = alloc.allocate(std::size_t{3} << 20);
  std::printf("allocated %zu bytes at %#zx and %zu bytes at %#zx\n", a.size,
              static_cast<std::size_t>(a.address), b.size, static_cast<std::size_t>(b.address));
  alloc.free(a.address);
  const memkit::allocation c = alloc.allocate(6000);  // served from the cache
  alloc.free(c.address);
  alloc.free(b.address);
  const memkit::statistics s = alloc.get_statistics();
  std::printf("active %zu, peak %zu, cached %zu, reserved %zu; %llu allocations, %llu cache hits\n",
              s.active_bytes, s.peak_active_bytes, s.cached_bytes, s.reserved_bytes,
              static_cast<unsigned long long>(s.allocations),
              static_cast<unsigned long long>(s.cache_hits));
  return 0;
}

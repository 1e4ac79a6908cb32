/* The C API: what a Rust, Python or C framework calls through FFI. */
#include <stdio.h>

#include "memkit/memkit.h"

int main(void) {
  memkit_backend* device = memkit_sim_backend_create(1ull << 30, 0);
  memkit_allocator* alloc = memkit_allocator_create(device);
  uint64_t address = 0;
  size_t size = 0;
  if (memkit_allocate(alloc, 1000, 0, &address, &size) != MEMKIT_OK) {
    fprintf(stderr, "%s\n", memkit_last_error());
    return 1;
  }
  printf("allocated %zu bytes at 0x%llx\n", size, (unsigned long long)address);
  memkit_free(alloc, address);
  if (memkit_allocate(alloc, 2ull << 30, 0, &address, &size) != MEMKIT_OK)
    printf("expected failure: %s\n", memkit_last_error());
  memkit_statistics s;
  memkit_get_statistics(alloc, &s);
  printf("reserved %zu, cached %zu, allocations %llu\n", s.reserved_bytes, s.cached_bytes,
         (unsigned long long)s.allocations);
  memkit_allocator_destroy(alloc);
  memkit_backend_destroy(device);
  return 0;
}

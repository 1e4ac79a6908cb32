/* Uses the C API from C, linked with libmemkit.so: a simulated device, an allocator
 * with options, statistics, limits, a snapshot, and the backends this build may
 * lack (an error status, not a crash). */
#include <stdio.h>
#include <string.h>

#include "memkit/memkit.h"

#define CHECK(call)                                                           \
  do {                                                                        \
    memkit_status status_ = (call);                                           \
    if (status_ != MEMKIT_OK) {                                               \
      fprintf(stderr, "consumer_c: %s: status %d: %s\n", #call, (int)status_, \
              memkit_last_error());                                           \
      return 1;                                                               \
    }                                                                         \
  } while (0)

int main(void) {
  memkit_backend* device = memkit_sim_backend_create((size_t)1 << 30, 0);
  if (!device) {
    fprintf(stderr, "consumer_c: %s\n", memkit_last_error());
    return 1;
  }
  memkit_allocator_options options;
  CHECK(memkit_allocator_options_init(&options));
  options.policy = MEMKIT_POLICY_SEGMENTS;
  options.memory_limit = (size_t)512 << 20;
  options.thread_cache = 0; /* a freed block is free at once in the snapshot */
  memkit_allocator* alloc = NULL;
  CHECK(memkit_allocator_create_with_options(device, &options, &alloc));

  uint64_t first = 0, second = 0;
  size_t size = 0;
  CHECK(memkit_allocate(alloc, 6000, 0, &first, &size));
  CHECK(memkit_allocate(alloc, (size_t)4 << 20, 0, &second, NULL));
  CHECK(memkit_free(alloc, first));
  memkit_statistics s;
  CHECK(memkit_get_statistics(alloc, &s));
  size_t limit = 0;
  CHECK(memkit_get_memory_limit(alloc, &limit));
  memkit_snapshot* snapshot = NULL;
  CHECK(memkit_snapshot_create(alloc, &snapshot));
  size_t live = 0;
  for (size_t i = 0; i < snapshot->segment_count; ++i) {
    for (size_t j = 0; j < snapshot->segments[i].block_count; ++j) {
      live += snapshot->segments[i].blocks[j].live != 0;
    }
  }
  if (s.allocations != 2 || s.frees != 1 || limit != options.memory_limit || live != 1 ||
      snapshot->segment_count == 0) {
    fprintf(stderr, "consumer_c: unexpected: %llu allocations, limit %zu, %zu live blocks\n",
            (unsigned long long)s.allocations, limit, live);
    return 1;
  }
  memkit_snapshot_destroy(snapshot);
  CHECK(memkit_free(alloc, second));

  /* This machine may have no GPU, and the build no CUDA: either way a status. */
  memkit_backend* gpu = NULL;
  memkit_status cuda = memkit_cuda_backend_create(0, MEMKIT_CUDA_DEVICE, &gpu);
  if (cuda == MEMKIT_OK) {
    memkit_backend_destroy(gpu);
  } else if (cuda != MEMKIT_UNAVAILABLE || gpu != NULL || strlen(memkit_last_error()) == 0) {
    fprintf(stderr, "consumer_c: memkit_cuda_backend_create: status %d\n", (int)cuda);
    return 1;
  }
  if (memkit_allocate(alloc, 64, 0, NULL, NULL) != MEMKIT_INVALID_ARGUMENT) return 1;
  memkit_allocator_destroy(alloc);
  memkit_backend_destroy(device);
  if (memkit_last_error()[0] != '\0') return 1; /* cleared by the successful call */
  printf("consumer_c: memkit %s, %llu allocations, %zu live block in the snapshot\n",
         memkit_version(), (unsigned long long)s.allocations, live);
  return 0;
}

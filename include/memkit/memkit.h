/* memkit's C API: a thin layer over memkit::allocator for FFI (Rust, Python, C).
 * Calls that can fail return a memkit_status; memkit_last_error() then gives the
 * message of the failure on the calling thread. No call lets an exception out: a
 * NULL handle or output pointer is MEMKIT_INVALID_ARGUMENT (create functions return
 * NULL, the size_t setters 0, each with memkit_last_error() saying why). */
#ifndef MEMKIT_H
#define MEMKIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct memkit_backend memkit_backend;
typedef struct memkit_allocator memkit_allocator;

typedef enum memkit_status {
  MEMKIT_OK = 0,
  MEMKIT_INVALID_ARGUMENT = 1,
  MEMKIT_OUT_OF_MEMORY = 2,
  MEMKIT_INTERNAL_ERROR = 3
} memkit_status;

typedef struct memkit_statistics {
  size_t active_bytes, peak_active_bytes, requested_bytes, peak_requested_bytes;
  size_t cached_bytes, reserved_bytes, peak_reserved_bytes;
  uint64_t allocations, frees, cache_hits, backend_allocations, backend_frees;
  uint64_t retries, out_of_memory;
  size_t live_blocks, segments;
  uint64_t maps, unmaps; /* pages mapped and unmapped by the virtual-memory arena */
} memkit_statistics;

memkit_backend* memkit_cpu_backend_create(void);
/* capacity and granularity in bytes; 0 takes the defaults (80 GiB, 2 MiB). The
 * granularity must be a power of two. NULL on bad options. */
memkit_backend* memkit_sim_backend_create(size_t capacity, size_t granularity);
void memkit_backend_destroy(memkit_backend* backend);

/* The backend must outlive the allocator. */
memkit_allocator* memkit_allocator_create(memkit_backend* backend);
void memkit_allocator_destroy(memkit_allocator* allocator);

memkit_status memkit_allocate(memkit_allocator* allocator, size_t bytes, uint32_t queue,
                              uint64_t* address, size_t* size);
memkit_status memkit_free(memkit_allocator* allocator, uint64_t address);
memkit_status memkit_record_use(memkit_allocator* allocator, uint64_t address, uint32_t queue);

/* Setters return the previous value. A memory limit of 0 allows no memory at all
 * (the allocator starts with the backend's capacity as its limit). */
size_t memkit_set_memory_limit(memkit_allocator* allocator, size_t bytes);
size_t memkit_set_cache_limit(memkit_allocator* allocator, size_t bytes);
memkit_status memkit_set_wired_limit(memkit_allocator* allocator, size_t bytes, size_t* previous);

memkit_status memkit_get_statistics(const memkit_allocator* allocator, memkit_statistics* out);
memkit_status memkit_reset_peak(memkit_allocator* allocator);
memkit_status memkit_clear_cache(memkit_allocator* allocator);

const char* memkit_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* MEMKIT_H */

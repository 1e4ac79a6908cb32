/* memkit's C API: a thin layer over memkit::allocator for FFI (Rust, Python, C),
 * built as the shared library libmemkit.so (pkg-config memkit, or the CMake target
 * memkit::shared) and inside memkit::memkit.
 *
 * Calls that can fail return a memkit_status; memkit_last_error() then gives the
 * message of the failure on the calling thread, and "" after a call that succeeded.
 * No call lets an exception out: a NULL handle or a NULL required output pointer is
 * MEMKIT_INVALID_ARGUMENT (functions returning a pointer return NULL, the size_t
 * setters 0, each with memkit_last_error() saying why). Destroy functions accept
 * NULL. */
#ifndef MEMKIT_H
#define MEMKIT_H

#include <stddef.h>
#include <stdint.h>

/* The functions libmemkit.so exports; everything else in it is hidden. */
#if defined(__GNUC__) || defined(__clang__)
#define MEMKIT_API __attribute__((visibility("default")))
#else
#define MEMKIT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct memkit_backend memkit_backend;
typedef struct memkit_allocator memkit_allocator;

typedef enum memkit_status {
  MEMKIT_OK = 0,
  MEMKIT_INVALID_ARGUMENT = 1,
  MEMKIT_OUT_OF_MEMORY = 2,
  MEMKIT_INTERNAL_ERROR = 3,
  /* The backend is not in this build, or no device of its kind is present. */
  MEMKIT_UNAVAILABLE = 4
} memkit_status;

typedef struct memkit_statistics {
  size_t active_bytes, peak_active_bytes, requested_bytes, peak_requested_bytes;
  size_t cached_bytes, reserved_bytes, peak_reserved_bytes;
  uint64_t allocations, frees, cache_hits, backend_allocations, backend_frees;
  uint64_t retries, out_of_memory;
  size_t live_blocks, segments;
  uint64_t maps, unmaps; /* pages mapped and unmapped by the virtual-memory arena */
  /* queues made to wait, on the device, for another queue's work, so that blocks it
     freed could be reused at once */
  uint64_t queue_orders;
  /* pages the arena moved to another address (each a map; the old address keeps
     mapping it, so no unmap), and pages moved back where still mapped (no call) */
  uint64_t moves, returns;
} memkit_statistics;

/* The version of the library, "MAJOR.MINOR.PATCH". */
MEMKIT_API const char* memkit_version(void);

/* Backends. Destroy a backend after every allocator over it. */
MEMKIT_API memkit_backend* memkit_cpu_backend_create(void);
/* capacity and granularity in bytes; 0 takes the defaults (80 GiB, 2 MiB). The
 * granularity must be a power of two. NULL on bad options. */
MEMKIT_API memkit_backend* memkit_sim_backend_create(size_t capacity, size_t granularity);
MEMKIT_API void memkit_backend_destroy(memkit_backend* backend);

typedef enum memkit_cuda_memory {
  /* cudaMalloc segments, or virtual memory (reserved ranges with physical pages
   * mapped under live blocks) where the device supports it: an allocator with the
   * arena policy (the default there) uses virtual memory, with the segments policy
   * cudaMalloc. */
  MEMKIT_CUDA_DEVICE = 0,
  /* cudaMallocManaged where the device has concurrent managed access, else pinned
   * host memory. */
  MEMKIT_CUDA_MANAGED = 1,
  MEMKIT_CUDA_PINNED_HOST = 2 /* cudaHostAlloc */
} memkit_cuda_memory;

/* A backend over CUDA device `device`. MEMKIT_UNAVAILABLE when this build has no CUDA
 * backend or the device (or a driver) is missing. *out is NULL on failure. */
MEMKIT_API memkit_status memkit_cuda_backend_create(int device, memkit_cuda_memory memory,
                                                    memkit_backend** out);

/* A backend over a Vulkan device: device_index -1 takes the first suitable one;
 * webgpu_compatible non-zero keeps to WebGPU's limits. MEMKIT_UNAVAILABLE when this
 * build has no Vulkan backend or no suitable device is present. */
MEMKIT_API memkit_status memkit_vulkan_backend_create(int device_index, int webgpu_compatible,
                                                      memkit_backend** out);

/* Allocator options; memkit_allocator_options_init fills in the defaults. */
typedef enum memkit_policy {
  MEMKIT_POLICY_AUTOMATIC = 0, /* the arena where the backend has virtual memory */
  MEMKIT_POLICY_SEGMENTS = 1,
  MEMKIT_POLICY_ARENA = 2
} memkit_policy;

typedef struct memkit_allocator_options {
  memkit_policy policy;
  size_t memory_limit; /* 0: the backend's capacity */
  size_t cache_limit;  /* 0: the memory limit */
  size_t wired_limit;  /* 0: none wired */
  /* Arena: reserved may grow to (1 + arena_slack) x the peak of active bytes before
   * idle pages are moved instead (default 0.02; 0 seeks the floor). */
  double arena_slack;
  int validate;     /* non-zero: check every invariant after every operation */
  int thread_cache; /* non-zero (default): per-thread caches of small blocks */
  int plan_loops;   /* non-zero (default): the arena plans loops that repeat */
  /* non-zero (default): before growing, a queue waits on the device for the other
   * queues' pending frees and reuses them (where the backend can order queues) */
  int order_queues;
} memkit_allocator_options;

MEMKIT_API memkit_status memkit_allocator_options_init(memkit_allocator_options* options);

/* The backend must outlive the allocator. */
MEMKIT_API memkit_allocator* memkit_allocator_create(memkit_backend* backend);
/* options NULL: the defaults. *out is NULL on failure. */
MEMKIT_API memkit_status memkit_allocator_create_with_options(
    memkit_backend* backend, const memkit_allocator_options* options, memkit_allocator** out);
MEMKIT_API void memkit_allocator_destroy(memkit_allocator* allocator);

/* address is required; size may be NULL. */
MEMKIT_API memkit_status memkit_allocate(memkit_allocator* allocator, size_t bytes, uint32_t queue,
                                         uint64_t* address, size_t* size);
MEMKIT_API memkit_status memkit_free(memkit_allocator* allocator, uint64_t address);
MEMKIT_API memkit_status memkit_record_use(memkit_allocator* allocator, uint64_t address,
                                           uint32_t queue);

/* Setters return the previous value. A memory limit of 0 allows no memory at all
 * (the allocator starts with the backend's capacity as its limit). previous may be
 * NULL. */
MEMKIT_API size_t memkit_set_memory_limit(memkit_allocator* allocator, size_t bytes);
MEMKIT_API size_t memkit_set_cache_limit(memkit_allocator* allocator, size_t bytes);
MEMKIT_API memkit_status memkit_set_wired_limit(memkit_allocator* allocator, size_t bytes,
                                                size_t* previous);
MEMKIT_API memkit_status memkit_get_memory_limit(const memkit_allocator* allocator, size_t* out);
MEMKIT_API memkit_status memkit_get_cache_limit(const memkit_allocator* allocator, size_t* out);
MEMKIT_API memkit_status memkit_get_wired_limit(const memkit_allocator* allocator, size_t* out);

MEMKIT_API memkit_status memkit_get_statistics(const memkit_allocator* allocator,
                                               memkit_statistics* out);
MEMKIT_API memkit_status memkit_reset_peak(memkit_allocator* allocator);
/* Gives every cached byte back to the device, waiting for the queued work of the
 * blocks freed so far (as torch.cuda.empty_cache): what is safe goes back at once, the
 * rest as the device completes that work. */
MEMKIT_API memkit_status memkit_clear_cache(memkit_allocator* allocator);

/* Records every successful allocate and free from now on to `path` (replaced), as a
 * memkit trace that `memkit replay` reads back (lines a,<address>,<bytes>,<queue>,<ns>
 * and f,<address>,<ns>); blocks live before the start are left out. Stopping closes
 * the file; `events` (may be NULL) gets the lines written. */
MEMKIT_API memkit_status memkit_start_recording(memkit_allocator* allocator, const char* path);
MEMKIT_API memkit_status memkit_stop_recording(memkit_allocator* allocator, uint64_t* events);

/* A snapshot of the allocator's memory, like torch.cuda.memory_snapshot(): every
 * segment, and each run of mapped pages of the arena's range, with the blocks (or
 * the parts of blocks) that tile it, in address order. */
typedef struct memkit_block_record {
  size_t offset; /* from the segment's base */
  size_t size;
  size_t requested; /* 0 when free */
  int live;
} memkit_block_record;

typedef struct memkit_segment_record {
  uint64_t base;
  size_t size;
  int small; /* belongs to the small-block pool */
  size_t block_count;
  const memkit_block_record* blocks; /* block_count records, inside the snapshot's blocks */
} memkit_segment_record;

typedef struct memkit_snapshot {
  size_t segment_count;
  const memkit_segment_record* segments;
  size_t block_count; /* every block of every segment, segment by segment */
  const memkit_block_record* blocks;
} memkit_snapshot;

/* *out is NULL on failure; release it with memkit_snapshot_destroy. */
MEMKIT_API memkit_status memkit_snapshot_create(const memkit_allocator* allocator,
                                                memkit_snapshot** out);
MEMKIT_API void memkit_snapshot_destroy(memkit_snapshot* snapshot);

/* The message of the calling thread's last failed call; "" after a success. */
MEMKIT_API const char* memkit_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* MEMKIT_H */

// The cheapest allocator PyTorch's CUDAPluggableAllocator can call: freed blocks kept
// in a list per size and handed out again, cudaMalloc otherwise, one lock. call_cost.py
// runs it to tell the pluggable interface's own cost per call from an allocator's.
// Not an allocator to use: it never gives memory back and ignores streams.
//   c++ -O2 -shared -fPIC bare_allocator.cpp -I/usr/local/cuda/include \
//       -L/usr/local/cuda/lib64 -lcudart -o libbare_allocator.so
#include <cuda_runtime_api.h>
#include <sys/types.h>

#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace {
std::mutex mutex;
std::unordered_map<std::size_t, std::vector<void*>> free_by_size;
}  // namespace

extern "C" __attribute__((visibility("default"))) void* bare_malloc(ssize_t size, int,
                                                                    cudaStream_t) {
  const auto bytes = static_cast<std::size_t>(size);
  {
    std::lock_guard lock(mutex);
    std::vector<void*>& cached = free_by_size[bytes];
    if (!cached.empty()) {
      void* pointer = cached.back();
      cached.pop_back();
      return pointer;
    }
  }
  void* pointer = nullptr;
  return cudaMalloc(&pointer, bytes) == cudaSuccess ? pointer : nullptr;
}

extern "C" __attribute__((visibility("default"))) void bare_free(void* pointer, ssize_t size, int,
                                                                 cudaStream_t) {
  std::lock_guard lock(mutex);
  free_by_size[static_cast<std::size_t>(size)].push_back(pointer);
}

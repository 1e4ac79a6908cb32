// Whether page calls on one thread slow down another thread's work: a measure for a
// helper thread that would unmap and release pages off the allocating thread.
//
// Thread A enqueues work on its own stream: (1) many small cudaMemsetAsync calls, timed
// on the host (what a training loop's launches cost), (2) large memsets the GPU takes
// time over, timed until they finish (whether the GPU itself stalls). Thread B, when
// on, makes and gives back groups of 2 MiB pages in a loop: cuMemCreate, cuMemMap,
// cuMemSetAccess, then cuMemUnmap, cuMemRelease. Printed: A's figures alone and with
// B busy, what B's calls cost alone and beside A, and what they cost while a second
// thread makes and gives back groups too.
//
//   nvcc -O2 -o driver_overlap bench/gpu/driver_overlap.cpp -lcuda && ./driver_overlap
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

void check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "[driver_overlap] %s failed: CUresult %d\n", what, static_cast<int>(r));
    std::exit(1);
  }
}
void check(cudaError_t r, const char* what) {
  if (r != cudaSuccess) {
    std::fprintf(stderr, "[driver_overlap] %s failed: %s\n", what, cudaGetErrorName(r));
    std::exit(1);
  }
}
double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

struct pager {
  CUcontext context;
  int device;
  std::size_t page;
  int group_pages;
  int groups;
  CUdeviceptr base = 0;
  std::atomic<bool> stop{false};
  std::atomic<long> cycles{0};  // groups made and given back
  double busy_seconds = 0;

  void reserve() {
    check(cuMemAddressReserve(&base, page * group_pages * groups, 0, 0, 0), "cuMemAddressReserve");
  }
  void run() {
    check(cuCtxSetCurrent(context), "cuCtxSetCurrent");
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    CUmemAccessDesc access = {};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    const std::size_t bytes = page * group_pages;
    std::vector<CUmemGenericAllocationHandle> handles(groups);
    const auto start = std::chrono::steady_clock::now();
    while (!stop.load()) {
      for (int g = 0; g < groups; ++g) {
        check(cuMemCreate(&handles[g], bytes, &prop, 0), "cuMemCreate");
        check(cuMemMap(base + g * bytes, bytes, 0, handles[g], 0), "cuMemMap");
        check(cuMemSetAccess(base + g * bytes, bytes, &access, 1), "cuMemSetAccess");
      }
      for (int g = 0; g < groups; ++g) {
        check(cuMemUnmap(base + g * bytes, bytes), "cuMemUnmap");
        check(cuMemRelease(handles[g]), "cuMemRelease");
      }
      cycles += groups;
    }
    busy_seconds = seconds_since(start);
  }
};

// Host microseconds a small memset enqueues in, and milliseconds the large ones take.
struct work_figures {
  double enqueue_us;
  double gpu_ms;
};

work_figures run_work(cudaStream_t stream, void* buffer, std::size_t large) {
  constexpr int kSmall = 20000;
  constexpr int kLarge = 200;
  auto t = std::chrono::steady_clock::now();
  for (int i = 0; i < kSmall; ++i) check(cudaMemsetAsync(buffer, i & 0xff, 4096, stream), "memset");
  const double enqueue = seconds_since(t) / kSmall * 1e6;
  check(cudaStreamSynchronize(stream), "sync");
  t = std::chrono::steady_clock::now();
  for (int i = 0; i < kLarge; ++i)
    check(cudaMemsetAsync(buffer, i & 0xff, large, stream), "memset");
  check(cudaStreamSynchronize(stream), "sync");
  return {enqueue, seconds_since(t) / kLarge * 1e3};
}

}  // namespace

int main() {
  check(cudaSetDevice(0), "cudaSetDevice");
  check(cudaFree(nullptr), "cudaFree");
  pager p;
  check(cuCtxGetCurrent(&p.context), "cuCtxGetCurrent");
  check(cuCtxGetDevice(&p.device), "cuCtxGetDevice");
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = p.device;
  check(cuMemGetAllocationGranularity(&p.page, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
        "granularity");
  const std::size_t large = std::size_t{256} << 20;
  void* buffer = nullptr;
  check(cudaMalloc(&buffer, large), "cudaMalloc");
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  std::printf(
      "work: %d small memsets (host us each), then large memsets of 256 MiB (GPU ms each)\n",
      20000);
  for (int group_pages : {1, 8}) {
    p.group_pages = group_pages;
    p.groups = 64;
    p.reserve();
    // B alone, for its own cost.
    p.stop = false;
    p.cycles = 0;
    std::thread alone([&] { p.run(); });
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    p.stop = true;
    alone.join();
    const double alone_us = p.busy_seconds / static_cast<double>(p.cycles) * 1e6;
    for (int round = 0; round < 3; ++round) {
      run_work(stream, buffer, large);  // warm
      const work_figures quiet = run_work(stream, buffer, large);
      p.stop = false;
      p.cycles = 0;
      std::thread busy([&] { p.run(); });
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      const work_figures loaded = run_work(stream, buffer, large);
      p.stop = true;
      busy.join();
      const double beside_us =
          p.busy_seconds / static_cast<double>(std::max<long>(p.cycles, 1)) * 1e6;
      std::printf(
          "groups of %d pages, round %d: small memset %.2f -> %.2f us, large memset %.3f -> "
          "%.3f ms; a group made and given back %.1f us alone, %.1f us beside the work\n",
          group_pages, round, quiet.enqueue_us, loaded.enqueue_us, quiet.gpu_ms, loaded.gpu_ms,
          alone_us, beside_us);
    }
    // Two threads making and giving back groups at once: whether the driver runs their
    // page calls side by side or one after the other.
    pager q;
    q.context = p.context;
    q.device = p.device;
    q.page = p.page;
    q.group_pages = group_pages;
    q.groups = p.groups;
    q.reserve();
    p.stop = false;
    p.cycles = 0;
    std::thread first([&] { p.run(); });
    std::thread second([&] { q.run(); });
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    p.stop = true;
    q.stop = true;
    first.join();
    second.join();
    std::printf(
        "groups of %d pages, two threads at once: a group made and given back %.1f / %.1f us "
        "each (%.1f alone)\n",
        group_pages, p.busy_seconds / static_cast<double>(std::max<long>(p.cycles, 1)) * 1e6,
        q.busy_seconds / static_cast<double>(std::max<long>(q.cycles, 1)) * 1e6, alone_us);
    check(cuMemAddressFree(q.base, q.page * q.group_pages * q.groups), "cuMemAddressFree");
    check(cuMemAddressFree(p.base, p.page * p.group_pages * p.groups), "cuMemAddressFree");
  }
  return 0;
}

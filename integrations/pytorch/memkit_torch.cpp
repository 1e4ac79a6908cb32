// memkit as PyTorch's CUDA allocator, through torch.cuda.memory.CUDAPluggableAllocator:
//
//   alloc = torch.cuda.memory.CUDAPluggableAllocator(
//       "libmemkit_torch.so", "memkit_torch_malloc", "memkit_torch_free")
//   torch.cuda.memory.change_current_allocator(alloc)  # before any CUDA allocation
//
// One memkit::allocator over a cuda_backend per device, made on first use. Streams
// become the backend's queues, so a block freed on a stream is reused at once on
// that stream and on others only once the stream's work has completed.
// Statistics are read with ctypes (memkit_torch_get_statistics; see train_compare.py).
//
// The Python package's memkit.torch, memkit.cupy and memkit.numba use this library
// too, through the functions below that return a memkit_status and never throw
// (memkit_torch_last_error() gives the calling thread's message): one allocator per
// device for every framework in the process.
//
// The names carry a `_torch` suffix: memkit_malloc/memkit_free would clash with the C
// API of include/memkit/memkit.h.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <sys/types.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "memkit/allocator.hpp"
#include "memkit/backends/cuda.hpp"
#include "memkit/capi.hpp"
#include "memkit/memkit.h"
#include "torch_abi.hpp"

#define MEMKIT_TORCH_API extern "C" __attribute__((visibility("default")))

namespace {

constexpr int kMaxDevices = 64;

// MEMKIT_POLICY (automatic | segments | arena), MEMKIT_ARENA_SLACK (a fraction, e.g.
// 0.02), MEMKIT_PLAN_LOOPS, MEMKIT_THREAD_CACHE, MEMKIT_ORDER_QUEUES and
// MEMKIT_SMALL_SEGMENTS_IN_ARENA (0 | 1) choose the allocator's options, as memkit
// replay's --policy, --arena-slack, --plan-loops, --order-queues and
// --small-segments-in-arena do; a bad value is an error naming the variable.
memkit::allocator_options get_options_from_environment() {
  memkit::allocator_options options;
  if (const char* policy = std::getenv("MEMKIT_POLICY")) {
    const std::string name = policy;
    if (name == "automatic") {
      options.policy = memkit::pool_policy::automatic;
    } else if (name == "segments") {
      options.policy = memkit::pool_policy::segments;
    } else if (name == "arena") {
      options.policy = memkit::pool_policy::arena;
    } else {
      throw memkit::invalid_argument("[memkit::torch_malloc] MEMKIT_POLICY='" + name +
                                     "': expected automatic, segments or arena");
    }
  }
  if (const char* slack = std::getenv("MEMKIT_ARENA_SLACK")) {
    char* end = nullptr;
    const double value = std::strtod(slack, &end);
    if (end == slack || *end != '\0' || !(value >= 0.0 && value <= 10.0)) {
      throw memkit::invalid_argument("[memkit::torch_malloc] MEMKIT_ARENA_SLACK='" +
                                     std::string(slack) + "': expected a fraction from 0 to 10");
    }
    options.arena_slack = value;
  }
  auto read_switch = [](const char* variable, bool& option) {
    const char* text = std::getenv(variable);
    if (!text) return;
    const std::string value = text;
    if (value != "0" && value != "1") {
      throw memkit::invalid_argument("[memkit::torch_malloc] " + std::string(variable) + "='" +
                                     value + "': expected 0 or 1");
    }
    option = value == "1";
  };
  read_switch("MEMKIT_PLAN_LOOPS", options.plan_loops);
  read_switch("MEMKIT_THREAD_CACHE", options.thread_cache);
  read_switch("MEMKIT_ORDER_QUEUES", options.order_queues);
  read_switch("MEMKIT_SMALL_SEGMENTS_IN_ARENA", options.small_segments_in_arena);
  return options;
}

// MEMKIT_RECORD=PATH: each device's allocator records its calls to PATH (device 0)
// or PATH.<device> (others), as memkit traces that memkit replay reads.
std::string get_record_path(int device) {
  const char* path = std::getenv("MEMKIT_RECORD");
  if (!path || !*path) return {};
  return device == 0 ? std::string(path) : std::string(path) + "." + std::to_string(device);
}

// Options set by memkit_torch_configure, in place of the environment's; guarded by
// create_mutex.
std::optional<memkit::allocator_options> configured_options;

memkit::allocator_options get_options(int device) {
  memkit::allocator_options options =
      configured_options ? *configured_options : get_options_from_environment();
  if (options.record_path.empty()) options.record_path = get_record_path(device);
  return options;
}

// CUDA graph capture. PyTorch captures a graph into a private memory pool: between
// begin_allocate_to_pool and end_allocate_to_pool, requests on the streams its filter
// accepts come from the pool, and the pool's blocks serve no one else while the graph
// lives (every replay writes them again). Each pool here is an allocator of its own
// over the device's backend: segments (cudaMalloc may be called during a capture;
// mapping pages and querying events may not), one queue (the capture's order is the
// replay's). Blocks of the device's allocator freed during a capture are freed once
// no capture is under way: that free could record an event on the capturing stream.
// A pool PyTorch releases goes once its last block is freed, outside any capture.
using pool_id = std::pair<unsigned long long, unsigned long long>;  // c10's MempoolId_t
using stream_filter = std::function<bool(cudaStream_t)>;

// The calling thread's stream-capture mode, relaxed while it lives.
class relaxed_capture_mode {
 public:
  relaxed_capture_mode() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~relaxed_capture_mode() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  relaxed_capture_mode(const relaxed_capture_mode&) = delete;
  relaxed_capture_mode& operator=(const relaxed_capture_mode&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

memkit::allocator_options get_graph_pool_options() {
  memkit::allocator_options options;
  options.policy = memkit::pool_policy::segments;
  options.thread_cache = false;
  options.plan_loops = false;
  return options;
}

struct graph_pool {
  explicit graph_pool(memkit::cuda_backend& backend)
      : allocator(backend, get_graph_pool_options()) {}
  memkit::allocator allocator;
  std::size_t users = 0;  // live blocks, and requests being served outside the lock
  bool released = false;  // PyTorch is done with it: it goes when users == 0
};

class graph_pools {
 public:
  // Whether malloc must look here: a capture is under way.
  bool is_capturing() const { return capturing_.load(std::memory_order_acquire); }
  // Whether free must: a capture is under way, or a pool has blocks.
  bool is_engaged() const { return engaged_.load(std::memory_order_acquire); }

  void begin(pool_id id, stream_filter filter) {
    std::lock_guard lock(mutex_);
    std::unique_ptr<graph_pool>& pool = pools_[id];
    if (!pool) pool = std::make_unique<graph_pool>(backend_);
    pool->released = false;
    captures_.push_back({id, std::move(filter), pool.get()});
    update();
  }

  // Frees the device allocator's blocks that waited for the last capture to end.
  void end(pool_id id, memkit::allocator& device_allocator) {
    std::vector<memkit::address_t> frees;
    std::vector<std::unique_ptr<graph_pool>> gone;
    {
      std::lock_guard lock(mutex_);
      for (auto it = captures_.rbegin(); it != captures_.rend(); ++it) {
        if (it->id == id) {
          captures_.erase(std::next(it).base());
          break;
        }
      }
      if (captures_.empty()) {
        frees.swap(deferred_);
        if (!doomed_.empty()) fold_peaks();
        gone.swap(doomed_);
        recount_pools();
      }
      update();
    }
    for (const memkit::address_t address : frees) device_allocator.free(address);
  }

  void release(pool_id id) {
    std::unique_ptr<graph_pool> gone;
    {
      std::lock_guard lock(mutex_);
      auto it = pools_.find(id);
      if (it == pools_.end()) return;
      it->second->released = true;
      if (it->second->users == 0) {
        fold_peaks();
        gone = take_out(it);
        recount_pools();
      }
      update();
    }
  }

  // A block for a request on `stream` when a capture under way accepts the stream.
  bool allocate(std::size_t size, cudaStream_t stream, void** out) {
    graph_pool* pool = nullptr;
    {
      std::lock_guard lock(mutex_);
      for (auto it = captures_.rbegin(); it != captures_.rend() && !pool; ++it) {
        if (!it->accepts || it->accepts(stream)) pool = it->pool;
      }
      if (!pool) return false;
      pool->users++;  // it stays while the request is served outside the lock
      fold_peaks();
    }
    memkit::allocation a;
    try {
      // cudaMalloc is "potentially unsafe" in a capture's global mode, as PyTorch's own
      // allocator knows: its new memory is allowed (replays ignore the call) once the
      // thread's mode is relaxed around it.
      const relaxed_capture_mode relaxed;
      a = pool->allocator.allocate(size);
    } catch (...) {
      unuse(pool);
      throw;
    }
    std::lock_guard lock(mutex_);
    if (a.address) {
      owners_[a.address] = pool;
    } else {
      pool->users--;  // size 0: nothing to own
    }
    recount_pools();
    update();
    *out = reinterpret_cast<void*>(a.address);
    return true;
  }

  // Whether the block was a pool's (then freed there) or its free waits for the
  // captures to end.
  bool free(memkit::address_t address) {
    graph_pool* pool = nullptr;
    {
      std::lock_guard lock(mutex_);
      auto it = owners_.find(address);
      if (it == owners_.end()) {
        if (captures_.empty()) return false;
        deferred_.push_back(address);
        update();
        return true;
      }
      pool = it->second;
      owners_.erase(it);
      fold_peaks();
    }
    pool->allocator.free(address);
    unuse(pool);
    return true;
  }

  // The device allocator's counters `device` with the pools': their sums, and peaks of
  // the sums (see fold_peaks).
  memkit::statistics add_statistics(const memkit::statistics& device) {
    std::lock_guard lock(mutex_);
    memkit::statistics s = device;
    memkit::add_counters(s, pools_now_);
    s.peak_active_bytes =
        std::max(combined_.peak_active_bytes, device.peak_active_bytes + pools_now_.active_bytes);
    s.peak_requested_bytes = std::max(combined_.peak_requested_bytes,
                                      device.peak_requested_bytes + pools_now_.requested_bytes);
    s.peak_reserved_bytes = std::max(combined_.peak_reserved_bytes,
                                     device.peak_reserved_bytes + pools_now_.reserved_bytes);
    return s;
  }

  // After the device allocator's peaks were reset: the peaks of the sums are the sums now.
  void reset_peaks() {
    std::lock_guard lock(mutex_);
    combined_ = {};
    fold_peaks();
  }

  // Whether the pool's live blocks are exactly `expected` (PyTorch's CUDA graph trees
  // check this before they hand a pool's memory on).
  bool holds_exactly(pool_id id, const std::unordered_set<void*>& expected) {
    std::lock_guard lock(mutex_);
    auto it = pools_.find(id);
    if (it == pools_.end()) return expected.empty();
    std::size_t live = 0;
    for (const auto& [address, pool] : owners_) {
      if (pool != it->second.get()) continue;
      if (!expected.count(reinterpret_cast<void*>(address))) return false;
      ++live;
    }
    return live == expected.size();
  }

  // Whether a pool holds the block.
  bool owns(memkit::address_t address) {
    std::lock_guard lock(mutex_);
    return owners_.count(address) != 0;
  }

  graph_pools(memkit::cuda_backend& backend, memkit::allocator& device)
      : backend_(backend), device_(device) {}

 private:
  struct capture {
    pool_id id;
    stream_filter accepts;  // empty: every stream
    graph_pool* pool;
  };

  // The peaks of device + pools: the pools' memory changes only here (in a pool's
  // call), so before each change the device allocator's peak since the last one, plus
  // the pools' counters of that while, is a peak of the sum; then the device
  // allocator's peaks start again from its current values.
  void fold_peaks() {
    const memkit::statistics d = device_.get_statistics();
    combined_.peak_active_bytes =
        std::max(combined_.peak_active_bytes, d.peak_active_bytes + pools_now_.active_bytes);
    combined_.peak_requested_bytes = std::max(combined_.peak_requested_bytes,
                                              d.peak_requested_bytes + pools_now_.requested_bytes);
    combined_.peak_reserved_bytes =
        std::max(combined_.peak_reserved_bytes, d.peak_reserved_bytes + pools_now_.reserved_bytes);
    device_.reset_peak();
  }
  // After a change: the pools' counters summed.
  void recount_pools() {
    pools_now_ = {};
    for (const auto& entry : pools_)
      memkit::add_counters(pools_now_, entry.second->allocator.get_statistics());
    for (const auto& pool : doomed_)
      memkit::add_counters(pools_now_, pool->allocator.get_statistics());
  }

  void unuse(graph_pool* pool) {
    std::unique_ptr<graph_pool> gone;
    std::lock_guard lock(mutex_);
    if (--pool->users == 0 && pool->released) {
      for (auto it = pools_.begin(); it != pools_.end(); ++it) {
        if (it->second.get() == pool) {
          gone = take_out(it);
          break;
        }
      }
    }
    recount_pools();
    update();
  }
  // A released pool without blocks: out of the map, destroyed by the caller after the
  // lock (its segments go back with cudaFree), or once the captures end.
  std::unique_ptr<graph_pool> take_out(
      std::map<pool_id, std::unique_ptr<graph_pool>>::iterator it) {
    std::unique_ptr<graph_pool> pool = std::move(it->second);
    pools_.erase(it);
    if (captures_.empty()) return pool;
    doomed_.push_back(std::move(pool));
    return nullptr;
  }
  void update() {
    capturing_.store(!captures_.empty(), std::memory_order_release);
    engaged_.store(!captures_.empty() || !owners_.empty(), std::memory_order_release);
  }

  memkit::cuda_backend& backend_;
  memkit::allocator& device_;  // the device's allocator, for the peaks of the sums
  std::atomic<bool> capturing_{false};
  std::atomic<bool> engaged_{false};
  std::mutex mutex_;               // guards everything below; never held across an allocator call
  std::vector<capture> captures_;  // under way, in the order they began
  std::map<pool_id, std::unique_ptr<graph_pool>> pools_;
  std::unordered_map<memkit::address_t, graph_pool*> owners_;  // live blocks of the pools
  std::vector<memkit::address_t> deferred_;          // the device allocator's, freed in a capture
  std::vector<std::unique_ptr<graph_pool>> doomed_;  // released during a capture
  memkit::statistics pools_now_;  // the pools' counters summed, as of their last change
  memkit::statistics combined_;   // its peak_*: of device + pools, up to that change
};

struct device_allocator {
  explicit device_allocator(int device)
      : backend(memkit::cuda_options{.device = device}),
        allocator(backend, get_options(device)),
        graphs(backend, allocator) {}
  // The device allocator's counters with the graph pools'.
  memkit::statistics get_statistics() { return graphs.add_statistics(allocator.get_statistics()); }
  // The peaks start again from the current counters, the graph pools' too.
  void reset_peaks() {
    allocator.reset_peak();
    graphs.reset_peaks();
  }
  // The accumulated counters as of PyTorch's last resetAccumulatedStats.
  memkit::statistics get_accumulated_base() {
    std::lock_guard lock(accumulated_mutex);
    return accumulated_base;
  }
  void reset_accumulated() {
    const memkit::statistics now = get_statistics();
    std::lock_guard lock(accumulated_mutex);
    accumulated_base = now;
  }
  memkit::cuda_backend backend;
  memkit::allocator allocator;
  graph_pools graphs;
  std::mutex accumulated_mutex;
  memkit::statistics accumulated_base;  // guarded by accumulated_mutex
};

std::array<std::atomic<device_allocator*>, kMaxDevices> devices{};
std::mutex create_mutex;

// MEMKIT_TORCH_TIMING=1: the time spent inside malloc and free, for telling memkit's
// own cost from the rest of a step (memkit_torch_get_call_time).
const bool timing = [] {
  const char* v = std::getenv("MEMKIT_TORCH_TIMING");
  return v && std::string(v) == "1";
}();
std::atomic<std::uint64_t> call_ns{0};
std::atomic<std::uint64_t> calls{0};

struct call_timer {
  std::chrono::steady_clock::time_point start;
  call_timer() {
    if (timing) [[unlikely]]
      start = std::chrono::steady_clock::now();
  }
  ~call_timer() {
    if (!timing) [[likely]]
      return;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now() - start);
    call_ns.fetch_add(static_cast<std::uint64_t>(ns.count()), std::memory_order_relaxed);
    calls.fetch_add(1, std::memory_order_relaxed);
  }
};

// The device's allocator, null where memkit has not allocated (or no such device).
device_allocator* find_device_allocator(int device) {
  return device >= 0 && device < kMaxDevices ? devices[device].load(std::memory_order_acquire)
                                             : nullptr;
}

// At the first allocation: PyTorch's hooks (memkit_torch_install_hooks), when PyTorch's
// current allocator is a CUDAPluggableAllocator, so that a program that installs this
// library with torch.cuda.memory.CUDAPluggableAllocator alone gets them too.
void install_hooks_once();

// Made once and never destroyed: PyTorch frees tensors during interpreter exit, after
// static destructors and the CUDA runtime's teardown may have run.
device_allocator& get_device_allocator(int device, const char* function) {
  if (device < 0 || device >= kMaxDevices) [[unlikely]] {
    throw memkit::invalid_argument(std::string("[memkit::") + function + "] device " +
                                   std::to_string(device) + " is outside 0.." +
                                   std::to_string(kMaxDevices - 1));
  }
  if (device_allocator* d = devices[device].load(std::memory_order_acquire)) [[likely]] {
    return *d;
  }
  device_allocator* d = nullptr;
  {
    std::lock_guard lock(create_mutex);
    d = devices[device].load(std::memory_order_relaxed);
    if (!d) {
      d = new device_allocator(device);
      devices[device].store(d, std::memory_order_release);
    }
  }
  install_hooks_once();
  return *d;
}

}  // namespace

// When nothing can make room (or a request is past the device's largest buffer), throws
// PyTorch's c10::OutOfMemoryError (Python's torch.cuda.OutOfMemoryError), as PyTorch's
// own allocator does, with PyTorch's "CUDA out of memory." in its message, which tools
// that shrink a batch on out-of-memory look for; memkit::out_of_memory where PyTorch
// is not loaded.
MEMKIT_TORCH_API void* memkit_torch_malloc(ssize_t size, int device, cudaStream_t stream) {
  const call_timer timer;
  device_allocator& d = get_device_allocator(device, "torch_malloc");
  const auto bytes = static_cast<std::size_t>(size);
  try {
    if (d.graphs.is_capturing()) [[unlikely]] {
      void* pointer = nullptr;
      if (d.graphs.allocate(bytes, stream, &pointer)) return pointer;
    }
    const memkit::queue_id queue = d.backend.get_queue(stream);
    return reinterpret_cast<void*>(d.allocator.allocate(bytes, queue).address);
  } catch (const memkit::out_of_memory& e) {
    memkit::torch_abi::throw_out_of_memory(
        std::string("[memkit::torch_malloc] CUDA out of memory. ") + e.what());
    throw;
  } catch (const memkit::invalid_argument& e) {
    if (bytes > d.backend.get_facts().max_buffer) {
      memkit::torch_abi::throw_out_of_memory(
          "[memkit::torch_malloc] CUDA out of memory. Tried to allocate " + std::to_string(bytes) +
          " bytes on device " + std::to_string(device) + ": " + e.what());
    }
    throw;
  }
}

MEMKIT_TORCH_API void memkit_torch_free(void* pointer, ssize_t, int device, cudaStream_t) {
  const call_timer timer;
  device_allocator& d = get_device_allocator(device, "torch_free");
  const auto address = reinterpret_cast<memkit::address_t>(pointer);
  if (d.graphs.is_engaged() && d.graphs.free(address)) [[unlikely]]
    return;
  d.allocator.free(address);
}

// The block is also used on `stream` (like Tensor.record_stream): its reuse after
// free waits for the work queued there by then.
MEMKIT_TORCH_API void memkit_torch_record_stream(void* pointer, int device, cudaStream_t stream) {
  device_allocator& d = get_device_allocator(device, "torch_record_stream");
  // A graph pool's block is only ever reused in its own capture's order.
  if (d.graphs.is_engaged() && d.graphs.owns(reinterpret_cast<memkit::address_t>(pointer))) return;
  d.allocator.record_use(reinterpret_cast<memkit::address_t>(pointer), d.backend.get_queue(stream));
}

namespace {

// PyTorch's CUDAPluggableAllocator class (torch/csrc/cuda/CUDAPluggableAllocator.h)
// takes record_stream, the calls of CUDA graph capture, empty_cache and the memory
// fraction through public methods that its Python API does not expose. They are
// looked up here by their (Itanium) names in the loaded libtorch_cuda.so, so that this
// library builds without PyTorch; a PyTorch whose methods take other types has other
// names, and then nothing is set.
constexpr const char* kCurrentAllocator = "_ZN3c104cuda20CUDACachingAllocator9allocatorE";
constexpr const char* kPluggableVtable =
    "_ZTVN5torch4cuda22CUDAPluggableAllocator22CUDAPluggableAllocatorE";
constexpr const char* kSetRecordStream =
    "_ZN5torch4cuda22CUDAPluggableAllocator22CUDAPluggableAllocator20set_record_stream_"
    "fnESt8functionIFvPvP11CUstream_stEE";
constexpr const char* kSetBeginAllocateToPool =
    "_ZN5torch4cuda22CUDAPluggableAllocator22CUDAPluggableAllocator26set_begin_allocate_to_"
    "poolESt8functionIFviSt4pairIyyES3_IFbP11CUstream_stEEEE";
constexpr const char* kSetEndAllocateToPool =
    "_ZN5torch4cuda22CUDAPluggableAllocator22CUDAPluggableAllocator27set_end_allocate_to_"
    "pool_fnESt8functionIFviSt4pairIyyEEE";
constexpr const char* kSetReleasePool =
    "_ZN5torch4cuda22CUDAPluggableAllocator22CUDAPluggableAllocator16set_release_"
    "poolESt8functionIFviSt4pairIyyEEE";
constexpr const char* kSetResetFn =
    "_ZN5torch4cuda22CUDAPluggableAllocator22CUDAPluggableAllocator12set_reset_"
    "fnESt8functionIFvvEE";
constexpr const char* kSetMemoryFractionFn =
    "_ZN5torch4cuda22CUDAPluggableAllocator22CUDAPluggableAllocator22set_memory_fraction_"
    "fnESt8functionIFvdiEE";
// Methods the pluggable class answers with an error, answered by memkit (torch_abi.hpp).
constexpr const char* kCacheInfo =
    "_ZN5torch4cuda22CUDAPluggableAllocator22CUDAPluggableAllocator9cacheInfoEaPm";
constexpr const char* kGetDeviceStats =
    "_ZN5torch4cuda22CUDAPluggableAllocator22CUDAPluggableAllocator14getDeviceStatsEa";
constexpr const char* kResetPeakStats =
    "_ZN5torch4cuda22CUDAPluggableAllocator22CUDAPluggableAllocator14resetPeakStatsEa";
constexpr const char* kResetAccumulatedStats =
    "_ZN5torch4cuda22CUDAPluggableAllocator22CUDAPluggableAllocator21resetAccumulatedStatsEa";
constexpr const char* kGetCheckpointState =
    "_ZN5torch4cuda22CUDAPluggableAllocator22CUDAPluggableAllocator18getCheckpointStateEaSt4pairIy"
    "yE";
// The slot after the base class's checkPoolLiveAllocations (inline: not exported).
constexpr const char* kShareIpcHandle =
    "_ZN5torch4cuda22CUDAPluggableAllocator22CUDAPluggableAllocator14shareIpcHandleEPv";

// A member function taking a std::function by value, called with its object.
template <class Signature>
using setter = void (*)(void* self, std::function<Signature>);

// The device whose memory holds `pointer` (PyTorch calls record_stream on any device).
int get_pointer_device(const void* pointer) {
  cudaPointerAttributes attributes{};
  const cudaError_t error = cudaPointerGetAttributes(&attributes, pointer);
  if (error != cudaSuccess || attributes.type != cudaMemoryTypeDevice) {
    cudaGetLastError();
    char where[32];
    std::snprintf(where, sizeof where, "%p", pointer);
    throw memkit::invalid_argument(std::string("[memkit::torch_record_stream] ") + where +
                                   " is not device memory");
  }
  return attributes.device;
}

// PyTorch's allocator methods (called on its allocator object, `self`; DeviceIndex is
// an int8). cacheInfo: the largest block a request could get now (cuDNN's benchmark
// mode sizes its workspaces by it): the cache, which the arena's page moves make one
// block of any size, plus the device's free memory within memkit's limit; PyTorch's
// allocator gives the larger of the device's free memory and its largest cached block.
void torch_cache_info(void*, std::int8_t device, std::size_t* largest) {
  int current = 0;
  std::size_t free_bytes = 0, total_bytes = 0;
  if (cudaGetDevice(&current) == cudaSuccess &&
      (current == device || cudaSetDevice(device) == cudaSuccess)) {
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) free_bytes = 0;
    if (current != device) cudaSetDevice(current);
  }
  cudaGetLastError();  // a failure above leaves no error behind for PyTorch's checks
  std::size_t available = free_bytes;
  if (device_allocator* d = find_device_allocator(device)) {
    const memkit::statistics s = d->get_statistics();
    const std::size_t limit = d->allocator.get_memory_limit();
    const std::size_t room = limit > s.reserved_bytes ? limit - s.reserved_bytes : 0;
    available = s.cached_bytes + std::min(free_bytes, room);
  }
  *largest = std::max(*largest, available);
}

// getDeviceStats: memkit's counters under PyTorch's names (torch.cuda.memory_allocated,
// max_memory_reserved, memory_stats, ...), in the "all" column; memkit keeps no pools
// apart and no peak count of blocks (the peaks of counts are the current counts).
memkit::torch_abi::device_stats torch_get_device_stats(void*, std::int8_t device) {
  memkit::torch_abi::device_stats out;
  device_allocator* d = find_device_allocator(device);
  if (!d) return out;
  const memkit::statistics s = d->get_statistics();
  const memkit::statistics base = d->get_accumulated_base();
  auto signed_count = [](std::uint64_t v) { return static_cast<std::int64_t>(v); };
  auto set = [&](memkit::torch_abi::stat& stat, std::size_t current, std::size_t peak) {
    stat.current = signed_count(current);
    stat.peak = signed_count(peak);
  };
  for (auto* blocks : {&out.allocation[0], &out.active[0]}) {
    set(*blocks, s.live_blocks, s.live_blocks);
    blocks->allocated = signed_count(s.allocations - base.allocations);
    blocks->freed = signed_count(s.frees - base.frees);
  }
  set(out.segment[0], s.segments, s.segments);
  out.segment[0].allocated = signed_count(s.backend_allocations - base.backend_allocations);
  out.segment[0].freed = signed_count(s.backend_frees - base.backend_frees);
  set(out.allocated_bytes[0], s.active_bytes, s.peak_active_bytes);
  set(out.active_bytes[0], s.active_bytes, s.peak_active_bytes);
  set(out.reserved_bytes[0], s.reserved_bytes, s.peak_reserved_bytes);
  set(out.requested_bytes[0], s.requested_bytes, s.peak_requested_bytes);
  out.num_alloc_retries = signed_count(s.retries - base.retries);
  out.num_ooms = signed_count(s.out_of_memory - base.out_of_memory);
  out.num_device_alloc = signed_count(s.backend_allocations - base.backend_allocations);
  out.num_device_free = signed_count(s.backend_frees - base.backend_frees);
  return out;
}

void torch_reset_peak_stats(void*, std::int8_t device) {
  if (device_allocator* d = find_device_allocator(device)) d->reset_peaks();
}

void torch_reset_accumulated_stats(void*, std::int8_t device) {
  if (device_allocator* d = find_device_allocator(device)) d->reset_accumulated();
}

// CUDA graph trees (torch.compile's "reduce-overhead") check a pool's live blocks
// before its next graph records into it, and keep the allocator's state of each graph
// for going back to it: memkit's pools keep no such state (an empty one), so going
// back (setCheckpointPoolState) stays PyTorch's error.
bool torch_check_pool_live_allocations(void*, std::int8_t device, pool_id id,
                                       const std::unordered_set<void*>& expected) {
  device_allocator* d = find_device_allocator(device);
  return d ? d->graphs.holds_exactly(id, expected) : expected.empty();
}
std::shared_ptr<void> torch_get_checkpoint_state(void*, std::int8_t, pool_id) { return {}; }

void install_hooks() {
  const char* function = "[memkit_torch_install_hooks] ";
  struct library {
    explicit library(const char* name) : handle(dlopen(name, RTLD_NOW | RTLD_NOLOAD)) {}
    ~library() {
      if (handle) dlclose(handle);
    }
    void* handle;
  };
  const library c10("libc10_cuda.so");
  const library torch_cuda("libtorch_cuda.so");
  if (!c10.handle || !torch_cuda.handle) {
    throw memkit::unavailable(std::string(function) +
                              "PyTorch's libc10_cuda.so and libtorch_cuda.so are not loaded in "
                              "this process: import torch first");
  }
  auto find = [&](void* handle, const char* name) {
    void* symbol = dlsym(handle, name);
    if (!symbol) {
      throw memkit::unavailable(std::string(function) + "this PyTorch has no " + name +
                                " (its CUDAPluggableAllocator differs): record_stream and CUDA "
                                "graphs are not supported with it");
    }
    return symbol;
  };
  auto* current = static_cast<std::atomic<void*>*>(find(c10.handle, kCurrentAllocator));
  void* const self = current->load();
  const auto set_record_stream = reinterpret_cast<setter<void(void*, cudaStream_t)>>(
      find(torch_cuda.handle, kSetRecordStream));
  const auto set_begin = reinterpret_cast<setter<void(int, pool_id, stream_filter)>>(
      find(torch_cuda.handle, kSetBeginAllocateToPool));
  const auto set_end =
      reinterpret_cast<setter<void(int, pool_id)>>(find(torch_cuda.handle, kSetEndAllocateToPool));
  const auto set_release =
      reinterpret_cast<setter<void(int, pool_id)>>(find(torch_cuda.handle, kSetReleasePool));
  const auto set_reset = reinterpret_cast<setter<void()>>(find(torch_cuda.handle, kSetResetFn));
  const auto set_fraction =
      reinterpret_cast<setter<void(double, int)>>(find(torch_cuda.handle, kSetMemoryFractionFn));
  // The setters are the pluggable class's: its object starts with a pointer into its
  // vtable, past the offset-to-top and type-info entries.
  const auto* vtable = static_cast<const char*>(find(torch_cuda.handle, kPluggableVtable));
  if (!self || (*static_cast<const void* const*>(self) != vtable + 2 * sizeof(void*) &&
                !memkit::torch_abi::has_overridden_vtable(self))) {
    throw memkit::unavailable(std::string(function) +
                              "PyTorch's current CUDA allocator is not a CUDAPluggableAllocator "
                              "(torch.cuda.memory.change_current_allocator comes first)");
  }

  set_record_stream(self, [](void* pointer, cudaStream_t stream) {
    memkit_torch_record_stream(pointer, get_pointer_device(pointer), stream);
  });
  set_begin(self, [](int device, pool_id id, stream_filter filter) {
    get_device_allocator(device, "torch_begin_allocate_to_pool")
        .graphs.begin(id, std::move(filter));
  });
  set_end(self, [](int device, pool_id id) {
    device_allocator& d = get_device_allocator(device, "torch_end_allocate_to_pool");
    d.graphs.end(id, d.allocator);
  });
  set_release(self, [](int device, pool_id id) {
    get_device_allocator(device, "torch_release_pool").graphs.release(id);
  });
  set_reset(self, [] {
    for (auto& slot : devices) {
      if (device_allocator* d = slot.load(std::memory_order_acquire)) d->allocator.clear_cache();
    }
  });
  set_fraction(self, [](double fraction, int device) {
    cudaDeviceProp properties{};
    const cudaError_t error = cudaGetDeviceProperties(&properties, device);
    if (error != cudaSuccess) {
      throw memkit::invalid_argument("[memkit::torch_set_memory_fraction] device " +
                                     std::to_string(device) + ": " + cudaGetErrorString(error));
    }
    get_device_allocator(device, "torch_set_memory_fraction")
        .allocator.set_memory_limit(
            static_cast<std::size_t>(fraction * static_cast<double>(properties.totalGlobalMem)));
  });
  std::vector<memkit::torch_abi::method> methods = {
      {kCacheInfo, reinterpret_cast<void*>(&torch_cache_info)},
      {kResetPeakStats, reinterpret_cast<void*>(&torch_reset_peak_stats)},
      {kResetAccumulatedStats, reinterpret_cast<void*>(&torch_reset_accumulated_stats)}};
  // DeviceStats is returned by value, and a slot found by its neighbour assumes the
  // class's order of methods: those only on the PyTorch they were checked on.
  if (memkit::torch_abi::get_torch_version(vtable) == memkit::torch_abi::kCheckedTorch) {
    methods.push_back({kGetDeviceStats, reinterpret_cast<void*>(&torch_get_device_stats)});
    methods.push_back(
        {kShareIpcHandle, reinterpret_cast<void*>(&torch_check_pool_live_allocations), -1});
    methods.push_back({kGetCheckpointState, reinterpret_cast<void*>(&torch_get_checkpoint_state)});
  }
  memkit::torch_abi::override_methods(self, vtable, {torch_cuda.handle, c10.handle}, methods);
}

void install_hooks_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    try {
      install_hooks();
    } catch (const memkit::error&) {
      // No PyTorch, or its allocator is not this library's: nothing to hook.
    }
  });
}

}  // namespace

// After torch.cuda.memory.change_current_allocator put this library's malloc and free
// in place: gives PyTorch's allocator object the hooks above, so that
// Tensor.record_stream, CUDA graph capture (torch.cuda.graph, torch.compile's
// "reduce-overhead"), torch.cuda.empty_cache and
// torch.cuda.set_per_process_memory_fraction reach memkit. MEMKIT_UNAVAILABLE with the
// reason when this PyTorch does not have them.
MEMKIT_TORCH_API int memkit_torch_install_hooks(void);

// 0 and the statistics of `device`; -1 (out untouched) when memkit has not been used there.
MEMKIT_TORCH_API int memkit_torch_get_statistics(int device, memkit_statistics* out) {
  device_allocator* d = find_device_allocator(device);
  if (!d) return -1;
  *out = memkit::capi::to_c_statistics(d->get_statistics());
  return 0;
}

// With MEMKIT_TORCH_TIMING=1: nanoseconds spent inside malloc and free, and calls, so far.
MEMKIT_TORCH_API void memkit_torch_get_call_time(std::uint64_t* ns, std::uint64_t* count) {
  *ns = call_ns.load(std::memory_order_relaxed);
  *count = calls.load(std::memory_order_relaxed);
}

namespace {

thread_local std::string last_error;
// The details of this thread's last out-of-memory (memkit_torch_allocate).
thread_local memkit::out_of_memory::details last_out_of_memory;

// Runs f; a failure becomes a status and this thread's last error.
template <class F>
int guarded(F&& f) noexcept {
  return memkit::capi::run_guarded(
      [&] {
        f();
        last_error.clear();
      },
      [](const memkit::capi::failure& failed) {
        if (failed.status == MEMKIT_OUT_OF_MEMORY) last_out_of_memory = failed.details;
        last_error = failed.message;
      });
}

// The allocator of a device in use; an error naming the function where it is not.
device_allocator& get_used_device_allocator(int device, const char* function) {
  if (device_allocator* d = find_device_allocator(device)) return *d;
  throw memkit::invalid_argument(std::string("[") + function +
                                 "] memkit has not allocated on device " + std::to_string(device));
}

}  // namespace

MEMKIT_TORCH_API int memkit_torch_reset_peak(int device) {
  return guarded([&] { get_device_allocator(device, "torch_reset_peak").reset_peaks(); });
}

// Gives every cached segment back to CUDA.
MEMKIT_TORCH_API int memkit_torch_empty_cache(int device) {
  return guarded(
      [&] { get_device_allocator(device, "torch_empty_cache").allocator.clear_cache(); });
}

// The message of this thread's last failed call below; "" after a success.
MEMKIT_TORCH_API const char* memkit_torch_last_error(void) { return last_error.c_str(); }

// Options for every device's allocator, in place of the environment variables; only
// before the first allocation on any device (MEMKIT_INVALID_ARGUMENT after it).
MEMKIT_TORCH_API int memkit_torch_configure(const memkit_allocator_options* options) {
  return guarded([&] {
    const char* function = "memkit_torch_configure";
    if (!options) throw memkit::invalid_argument(std::string("[") + function + "] options is NULL");
    const memkit::allocator_options converted = memkit::capi::to_options(*options, function);
    std::lock_guard lock(create_mutex);
    for (int device = 0; device < kMaxDevices; ++device) {
      if (devices[device].load(std::memory_order_relaxed)) {
        throw memkit::invalid_argument(
            std::string("[") + function + "] memkit has already allocated on device " +
            std::to_string(device) + ": configure before the first CUDA allocation");
      }
    }
    configured_options = converted;
  });
}

// 1 when memkit has allocated on the device (its allocator exists), else 0.
MEMKIT_TORCH_API int memkit_torch_is_used(int device) {
  return device >= 0 && device < kMaxDevices &&
         devices[device].load(std::memory_order_acquire) != nullptr;
}

// memkit_torch_malloc for other callers (CuPy, Numba): a status, the block in *out.
MEMKIT_TORCH_API int memkit_torch_allocate(int device, size_t bytes, void* stream, void** out) {
  return guarded([&] {
    *out = nullptr;
    device_allocator& d = get_device_allocator(device, "torch_allocate");
    const memkit::queue_id queue = d.backend.get_queue(static_cast<cudaStream_t>(stream));
    *out = reinterpret_cast<void*>(d.allocator.allocate(bytes, queue).address);
  });
}

MEMKIT_TORCH_API int memkit_torch_deallocate(int device, void* pointer) {
  return guarded([&] {
    get_device_allocator(device, "torch_deallocate")
        .allocator.free(reinterpret_cast<memkit::address_t>(pointer));
  });
}

// The details of this thread's last MEMKIT_OUT_OF_MEMORY: requested, active, cached,
// reserved bytes, the limit and the largest free block.
MEMKIT_TORCH_API void memkit_torch_get_out_of_memory_details(size_t out[6]) {
  const memkit::out_of_memory::details& d = last_out_of_memory;
  const size_t values[6] = {d.requested_bytes, d.reserved_bytes - d.cached_bytes,
                            d.cached_bytes,    d.reserved_bytes,
                            d.limit_bytes,     d.largest_free_bytes};
  for (int i = 0; i < 6; ++i) out[i] = values[i];
}

// The names of the statistics, comma-separated, in the order of
// memkit_torch_get_statistics_array (and of memkit_statistics).
MEMKIT_TORCH_API const char* memkit_torch_statistics_fields(void) {
  static const std::string names = [] {
    std::string joined;
    for (const auto& field : memkit::capi::statistics_fields) {
      if (!joined.empty()) joined += ',';
      joined += field.name;
    }
    return joined;
  }();
  return names.c_str();
}

// The statistics of a device as `count` numbers (count: the number of fields).
MEMKIT_TORCH_API int memkit_torch_get_statistics_array(int device, std::uint64_t* out,
                                                       size_t count) {
  return guarded([&] {
    const char* function = "memkit_torch_get_statistics_array";
    if (count != memkit::capi::statistics_fields.size()) {
      throw memkit::invalid_argument(std::string("[") + function + "] count " +
                                     std::to_string(count) + ", the fields are " +
                                     std::to_string(memkit::capi::statistics_fields.size()));
    }
    const memkit::statistics s = get_used_device_allocator(device, function).get_statistics();
    for (size_t i = 0; i < count; ++i) out[i] = memkit::capi::statistics_fields[i].get(s);
  });
}

// Limits of a device's allocator (made here when memkit has not allocated there yet).
// The setters give the previous value in *previous (may be NULL).
MEMKIT_TORCH_API int memkit_torch_set_memory_limit(int device, size_t bytes, size_t* previous) {
  return guarded([&] {
    const size_t p =
        get_device_allocator(device, "torch_set_memory_limit").allocator.set_memory_limit(bytes);
    if (previous) *previous = p;
  });
}

MEMKIT_TORCH_API int memkit_torch_set_cache_limit(int device, size_t bytes, size_t* previous) {
  return guarded([&] {
    const size_t p =
        get_device_allocator(device, "torch_set_cache_limit").allocator.set_cache_limit(bytes);
    if (previous) *previous = p;
  });
}

MEMKIT_TORCH_API int memkit_torch_get_memory_limit(int device, size_t* out) {
  return guarded([&] {
    *out = get_device_allocator(device, "torch_get_memory_limit").allocator.get_memory_limit();
  });
}

MEMKIT_TORCH_API int memkit_torch_get_cache_limit(int device, size_t* out) {
  return guarded([&] {
    *out = get_device_allocator(device, "torch_get_cache_limit").allocator.get_cache_limit();
  });
}

// The device's segments and blocks (memkit_snapshot of memkit.h); release it with
// memkit_torch_snapshot_destroy.
MEMKIT_TORCH_API int memkit_torch_snapshot_create(int device, memkit_snapshot** out) {
  return guarded([&] {
    *out = nullptr;
    *out = memkit::capi::make_c_snapshot(
        get_used_device_allocator(device, "memkit_torch_snapshot_create")
            .allocator.calculate_segments());
  });
}

MEMKIT_TORCH_API void memkit_torch_snapshot_destroy(memkit_snapshot* snapshot) {
  memkit::capi::destroy_c_snapshot(snapshot);
}

MEMKIT_TORCH_API int memkit_torch_install_hooks(void) {
  return guarded([] { install_hooks(); });
}

// memkit beside PyTorch's caching allocator and cudaMallocAsync, on one GPU, in one
// process so the figures compare: the allocate+free pair on a cache hit, a random
// window of 256 live blocks (256 B .. 64 MiB), and replays of allocation traces
// with each allocator's own peak reserved bytes.
//
//   memkit_gpu_bench [--pairs N] [--window-steps N] [--csv file] [trace.csv.gz ...]
//
// Every allocator works on one created stream. PyTorch's column is there when the
// build found PyTorch's C++ headers (MEMKIT_BENCH_TORCH).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "memkit/allocator.hpp"
#include "memkit/backends/cuda.hpp"
#include "memkit/trace.hpp"

#if MEMKIT_BENCH_TORCH
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace {

void check(cudaError_t error, const char* what) {
  if (error != cudaSuccess) {
    std::fprintf(stderr, "[memkit_gpu_bench] %s failed: %s\n", what, cudaGetErrorName(error));
    std::exit(1);
  }
}

double elapsed_ns(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
}

// One allocator under test. reset() gives every cached byte back and restarts the peak.
class allocator_under_test {
 public:
  virtual ~allocator_under_test() = default;
  virtual const char* get_name() const = 0;
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void free(void* pointer, std::size_t bytes) = 0;
  virtual std::size_t get_peak_reserved() = 0;
  virtual void reset() = 0;
};

class memkit_under_test final : public allocator_under_test {
 public:
  memkit_under_test(cudaStream_t stream, memkit::pool_policy policy, const char* name,
                    double arena_slack = memkit::allocator_options{}.arena_slack)
      : stream_(stream), policy_(policy), arena_slack_(arena_slack), name_(name) {
    reset();
  }
  const char* get_name() const override { return name_; }
  void* allocate(std::size_t bytes) override {
    // The stream lookup is part of the cost, as in the PyTorch integration.
    return reinterpret_cast<void*>(
        allocator_->allocate(bytes, backend_.get_queue(stream_)).address);
  }
  void free(void* pointer, std::size_t) override {
    allocator_->free(reinterpret_cast<memkit::address_t>(pointer));
  }
  std::size_t get_peak_reserved() override {
    return allocator_->get_statistics().peak_reserved_bytes;
  }
  void reset() override {
    allocator_.reset();  // gives every segment back
    allocator_ = std::make_unique<memkit::allocator>(
        backend_, memkit::allocator_options{.policy = policy_, .arena_slack = arena_slack_});
  }

 private:
  cudaStream_t stream_;
  memkit::pool_policy policy_;
  double arena_slack_;
  const char* name_;
  memkit::cuda_backend backend_;
  std::unique_ptr<memkit::allocator> allocator_;
};

class async_pool_under_test final : public allocator_under_test {
 public:
  explicit async_pool_under_test(cudaStream_t stream) : stream_(stream) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    check(cudaMemPoolCreate(&pool_, &props), "cudaMemPoolCreate");
    std::uint64_t threshold = UINT64_MAX;  // keep everything cached
    check(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &threshold),
          "cudaMemPoolSetAttribute");
  }
  ~async_pool_under_test() override { cudaMemPoolDestroy(pool_); }
  const char* get_name() const override { return "cudaMallocAsync"; }
  void* allocate(std::size_t bytes) override {
    void* pointer = nullptr;
    check(cudaMallocFromPoolAsync(&pointer, bytes, pool_, stream_), "cudaMallocFromPoolAsync");
    return pointer;
  }
  void free(void* pointer, std::size_t) override {
    check(cudaFreeAsync(pointer, stream_), "cudaFreeAsync");
  }
  std::size_t get_peak_reserved() override {
    std::uint64_t high = 0;
    check(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &high), "ReservedMemHigh");
    return high;
  }
  void reset() override {
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    check(cudaMemPoolTrimTo(pool_, 0), "cudaMemPoolTrimTo");
    std::uint64_t zero = 0;
    check(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &zero), "ReservedMemHigh");
  }

 private:
  cudaStream_t stream_;
  cudaMemPool_t pool_ = nullptr;
};

#if MEMKIT_BENCH_TORCH
namespace torch_allocator = c10::cuda::CUDACachingAllocator;

class torch_under_test final : public allocator_under_test {
 public:
  explicit torch_under_test(cudaStream_t stream) : stream_(stream) {
    torch_allocator::init(1);
    reset();
  }
  const char* get_name() const override { return "pytorch"; }
  void* allocate(std::size_t bytes) override {
    return torch_allocator::raw_alloc_with_stream(bytes, stream_);
  }
  void free(void* pointer, std::size_t) override { torch_allocator::raw_delete(pointer); }
  std::size_t get_peak_reserved() override {
    // Index 0 of every statistic array is the aggregate over both pools.
    return static_cast<std::size_t>(torch_allocator::getDeviceStats(0).reserved_bytes[0].peak);
  }
  void reset() override {
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    torch_allocator::emptyCache();
    torch_allocator::resetPeakStats(0);
  }

 private:
  cudaStream_t stream_;
};
#endif

struct options {
  long pairs = 200'000;
  long window_steps = 100'000;
  std::string csv;
  std::vector<std::string> traces;
};

struct result_row {
  std::string test;
  std::string allocator;
  double ns = 0;     // per pair, per free+allocate, or per trace event
  double ratio = 0;  // peak reserved / peak live (traces, window), else 0
  std::size_t peak_reserved = 0;
};

// The median over `repeats` runs of `pairs` allocate+free pairs of one size.
double measure_pair(allocator_under_test& a, std::size_t bytes, long pairs) {
  for (int i = 0; i < 1000; ++i) a.free(a.allocate(bytes), bytes);  // warm: fill the cache
  std::vector<double> runs;
  for (int r = 0; r < 5; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < pairs; ++i) a.free(a.allocate(bytes), bytes);
    runs.push_back(elapsed_ns(start) / static_cast<double>(pairs));
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

struct window_plan {
  std::vector<std::size_t> initial;  // 256 sizes
  std::vector<std::uint32_t> slot;   // per step: which block to free
  std::vector<std::size_t> size;     // per step: the size allocated in its place
};

window_plan plan_window(long steps) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> log_size(std::log(256.0), std::log(64.0 * (1 << 20)));
  auto draw = [&] { return static_cast<std::size_t>(std::exp(log_size(rng))); };
  window_plan p;
  for (int i = 0; i < 256; ++i) p.initial.push_back(draw());
  for (long i = 0; i < steps; ++i) {
    p.slot.push_back(static_cast<std::uint32_t>(rng() % 256));
    p.size.push_back(draw());
  }
  return p;
}

result_row measure_window(allocator_under_test& a, const window_plan& p) {
  a.reset();
  std::vector<void*> live(256);
  std::vector<std::size_t> sizes = p.initial;
  for (std::size_t i = 0; i < 256; ++i) live[i] = a.allocate(sizes[i]);
  // One untimed pass warms the cache, the timed pass follows the same plan.
  double ns = 0;
  for (int pass = 0; pass < 2; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < p.slot.size(); ++i) {
      const std::uint32_t s = p.slot[i];
      a.free(live[s], sizes[s]);
      sizes[s] = p.size[i];
      live[s] = a.allocate(sizes[s]);
    }
    ns = elapsed_ns(start) / static_cast<double>(p.slot.size());
  }
  const std::size_t peak = a.get_peak_reserved();
  for (std::size_t i = 0; i < 256; ++i) a.free(live[i], sizes[i]);
  a.reset();
  return {"window", a.get_name(), ns, 0, peak};
}

result_row replay(allocator_under_test& a, const memkit::trace::trace_data& t,
                  std::size_t peak_live) {
  a.reset();
  std::vector<void*> address(t.allocations, nullptr);
  std::vector<std::size_t> size(t.allocations, 0);
  const auto start = std::chrono::steady_clock::now();
  for (const memkit::trace::event& e : t.events) {
    if (e.kind == memkit::trace::action::allocate) {
      address[e.block] = a.allocate(e.size);
      size[e.block] = e.size;
    } else {
      a.free(address[e.block], size[e.block]);
      address[e.block] = nullptr;
    }
  }
  const double ns = elapsed_ns(start) / static_cast<double>(t.events.size());
  const std::size_t peak = a.get_peak_reserved();
  for (std::size_t b = 0; b < address.size(); ++b) {
    if (address[b]) a.free(address[b], size[b]);
  }
  a.reset();
  return {"replay " + t.name, a.get_name(), ns,
          static_cast<double>(peak) / static_cast<double>(peak_live), peak};
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "[memkit_gpu_bench] %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--pairs") {
      o.pairs = std::stol(value());
    } else if (arg == "--window-steps") {
      o.window_steps = std::stol(value());
    } else if (arg == "--csv") {
      o.csv = value();
    } else {
      o.traces.push_back(arg);
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  const memkit::cuda_availability available = memkit::check_cuda_device(0);
  if (!available.available) {
    std::printf("[memkit_gpu_bench] skipped: %s\n", available.reason.c_str());
    return 0;
  }
  check(cudaSetDevice(0), "cudaSetDevice");
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  cudaDeviceProp props{};
  cudaGetDeviceProperties(&props, 0);
  std::printf("device %s, CUDA driver API %d, runtime %d\n", props.name, driver, runtime);

  std::vector<std::unique_ptr<allocator_under_test>> allocators;
  // memkit's automatic policy (the virtual-memory arena where the device has it) and
  // its segment pools.
  allocators.push_back(
      std::make_unique<memkit_under_test>(stream, memkit::pool_policy::automatic, "memkit"));
  allocators.push_back(std::make_unique<memkit_under_test>(stream, memkit::pool_policy::automatic,
                                                           "memkit-floor", 0.0));
  allocators.push_back(std::make_unique<memkit_under_test>(stream, memkit::pool_policy::segments,
                                                           "memkit-segments"));
#if MEMKIT_BENCH_TORCH
  allocators.push_back(std::make_unique<torch_under_test>(stream));
#else
  std::printf("(built without PyTorch: its column is missing)\n");
#endif
  allocators.push_back(std::make_unique<async_pool_under_test>(stream));

  std::vector<result_row> rows;
  for (std::size_t bytes : {std::size_t{4} << 10, std::size_t{1} << 20, std::size_t{64} << 20}) {
    for (auto& a : allocators) {
      rows.push_back({"pair " + std::to_string(bytes) + " B", a->get_name(),
                      measure_pair(*a, bytes, o.pairs), 0, 0});
      a->reset();
    }
  }
  const window_plan plan = plan_window(o.window_steps);
  for (auto& a : allocators) rows.push_back(measure_window(*a, plan));
  for (const std::string& path : o.traces) {
    const memkit::trace::trace_data t = memkit::trace::read(path);
    const std::size_t peak_live = memkit::trace::calculate_peak_live(t);
    std::printf("trace %s: %zu events, peak live %zu bytes\n", t.name.c_str(), t.events.size(),
                peak_live);
    for (auto& a : allocators) rows.push_back(replay(*a, t, peak_live));
  }
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");

  std::printf("\n%-32s %-16s %12s %16s %10s\n", "test", "allocator", "ns", "peak reserved",
              "/peak live");
  for (const result_row& r : rows) {
    std::printf("%-32s %-16s %12.1f %16zu %10.3f\n", r.test.c_str(), r.allocator.c_str(), r.ns,
                r.peak_reserved, r.ratio);
  }
  if (!o.csv.empty()) {
    if (FILE* f = std::fopen(o.csv.c_str(), "w")) {
      std::fprintf(f, "test,allocator,ns,peak_reserved,ratio\n");
      for (const result_row& r : rows) {
        std::fprintf(f, "%s,%s,%.2f,%zu,%.4f\n", r.test.c_str(), r.allocator.c_str(), r.ns,
                     r.peak_reserved, r.ratio);
      }
      std::fclose(f);
    }
  }
  return 0;
}

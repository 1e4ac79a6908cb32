// Host cost of the allocator's calls on the workload suite's real sequences
// (data/traces/workloads), timed call by call, with the caches warm or evicted
// between calls: in a framework each call comes after kernels were launched and the
// allocator's records have left the CPU's caches, so the cold figure is the one a
// step pays. Arguments: trace, policy (0 default, 1 segments), evict (0, 1).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "memkit/memkit.hpp"
#include "memkit/trace.hpp"
#include "pools/segment_pool.hpp"

namespace {

const char* const kTraces[] = {"t5_train_adamw", "llama_ckpt_bf16", "gpt2_generate",
                               "resnet50_sgd"};

const memkit::trace::trace_data& get_trace(std::size_t k) {
  static std::vector<memkit::trace::trace_data> traces = [] {
    std::vector<memkit::trace::trace_data> all;
    for (const char* name : kTraces) {
      all.push_back(memkit::trace::read(std::string(MEMKIT_SOURCE_DIR) + "/data/traces/workloads/" +
                                        name + ".trace.csv.gz"));
    }
    return all;
  }();
  return traces[k];
}

// Touches 4 MiB, twice the core's L2: what the program does between two calls
// leaves the allocator's records in the shared cache at best.
[[gnu::noinline]] void evict_caches() {
  static std::vector<char> junk(std::size_t{4} << 20);
  for (std::size_t i = 0; i < junk.size(); i += 64) junk[i] = static_cast<char>(junk[i] + 1);
  benchmark::ClobberMemory();
}

// Above the small pool's limit beside an arena: the arena's requests.
constexpr std::size_t kLargeRequest = memkit::pools::kSmallRequestWithArena;

void trace_calls(benchmark::State& state) {
  const memkit::trace::trace_data& trace = get_trace(static_cast<std::size_t>(state.range(0)));
  const bool evict = state.range(2) != 0;
  double total_ns = 0;
  std::uint64_t calls = 0;
  double kind_ns[4] = {};  // small allocate, small free, large allocate, large free
  std::uint64_t kind_calls[4] = {};
  for (auto _ : state) {
    memkit::sim_options options;
    options.capacity = std::size_t{1} << 40;
    options.queue_count = 8;
    memkit::sim_backend device(options);
    memkit::allocator_options settings;
    if (state.range(1) == 1) settings.policy = memkit::pool_policy::segments;
    memkit::allocator alloc(device, settings);
    std::vector<memkit::address_t> address(trace.allocations, 0);
    std::vector<std::size_t> size_of(trace.allocations, 0);
    // The steps after the warm-up are timed; the warm-up runs untimed.
    const std::size_t timed_from =
        trace.step_starts.size() > trace.warmup_steps ? trace.step_starts[trace.warmup_steps] : 0;
    double ns = 0;
    for (std::size_t i = 0; i < trace.events.size(); ++i) {
      const memkit::trace::event& e = trace.events[i];
      const bool timed = i >= timed_from;
      if (timed && evict) evict_caches();
      const auto start = std::chrono::steady_clock::now();
      const bool allocating = e.kind == memkit::trace::action::allocate;
      if (allocating)
        address[e.block] = alloc.allocate(e.size, e.stream).address;
      else
        alloc.free(address[e.block]);
      if (timed) {
        const double call =
            std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
                .count();
        ns += call;
        ++calls;
        if (allocating) size_of[e.block] = e.size;
        const int kind = (size_of[e.block] > kLargeRequest ? 2 : 0) + (allocating ? 0 : 1);
        kind_ns[kind] += call;
        kind_calls[kind]++;
      }
    }
    total_ns += ns;
    state.SetIterationTime(ns * 1e-9);
  }
  state.counters["ns_per_call"] = total_ns / static_cast<double>(calls);
  const char* const kinds[] = {"small_allocate", "small_free", "large_allocate", "large_free"};
  for (int k = 0; k < 4; ++k) {
    state.counters[kinds[k]] =
        kind_ns[k] / static_cast<double>(std::max<std::uint64_t>(kind_calls[k], 1));
  }
  state.SetLabel(kTraces[state.range(0)]);
}
BENCHMARK(trace_calls)
    ->ArgsProduct({{0, 1, 2, 3}, {0, 1}, {0, 1}})
    ->ArgNames({"trace", "segments", "evict"})
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

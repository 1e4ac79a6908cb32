// Host cost of the allocator's calls. Figures go to docs/BENCHMARKS.md.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "memkit/memkit.hpp"

namespace {

template <class Backend>
void pair_cache_hit(benchmark::State& state) {
  Backend device;
  memkit::allocator alloc(device);
  const auto bytes = static_cast<std::size_t>(state.range(0));
  alloc.free(alloc.allocate(bytes).address);  // warm the cache
  for (auto _ : state) {
    const memkit::allocation a = alloc.allocate(bytes);
    benchmark::DoNotOptimize(a.address);
    alloc.free(a.address);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(pair_cache_hit<memkit::cpu_backend>)->Arg(4096)->Arg(1 << 20)->Name("pair_cache_hit/cpu");
BENCHMARK(pair_cache_hit<memkit::sim_backend>)->Arg(4096)->Arg(1 << 20)->Name("pair_cache_hit/sim");

// The same pair while recording every call to a trace file (two lines a pair).
void pair_cache_hit_recorded(benchmark::State& state) {
  memkit::sim_backend device;
  memkit::allocator alloc(device);
  const auto bytes = static_cast<std::size_t>(state.range(0));
  alloc.free(alloc.allocate(bytes).address);
  const std::string path = "/tmp/memkit_bench_record.csv";
  alloc.start_recording(path);
  for (auto _ : state) {
    const memkit::allocation a = alloc.allocate(bytes);
    benchmark::DoNotOptimize(a.address);
    alloc.free(a.address);
  }
  alloc.stop_recording();
  std::remove(path.c_str());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(pair_cache_hit_recorded)->Arg(4096)->Arg(1 << 20)->Name("pair_cache_hit_recorded/sim");

// A window of 256 live blocks of random sizes (256 B .. 64 MiB, log-uniform):
// each iteration frees a random one and allocates a new one in its place.
// Arg 0: the default policy (the arena on the simulated device); 1: segments.
void random_window(benchmark::State& state) {
  memkit::sim_options options;
  options.capacity = std::size_t{1} << 40;
  memkit::sim_backend device(options);
  memkit::allocator_options settings;
  if (state.range(0) == 1) settings.policy = memkit::pool_policy::segments;
  memkit::allocator alloc(device, settings);
  std::mt19937_64 rng(42);
  std::vector<std::size_t> sizes(1 << 16);
  std::uniform_real_distribution<double> exponent(8.0, 26.0);
  for (auto& s : sizes) s = static_cast<std::size_t>(std::exp2(exponent(rng)));
  std::vector<memkit::allocation> window(256);
  std::size_t next = 0;
  for (auto& a : window) a = alloc.allocate(sizes[next++ % sizes.size()]);
  // Reach a steady state before timing.
  for (int i = 0; i < 100000; ++i) {
    auto& a = window[rng() % window.size()];
    alloc.free(a.address);
    a = alloc.allocate(sizes[next++ % sizes.size()]);
  }
  for (auto _ : state) {
    auto& a = window[rng() % window.size()];
    alloc.free(a.address);
    a = alloc.allocate(sizes[next++ % sizes.size()]);
  }
  const memkit::statistics s = alloc.get_statistics();
  state.counters["reserved_over_active"] =
      static_cast<double>(s.reserved_bytes) / static_cast<double>(s.active_bytes);
  state.counters["hit_rate"] =
      static_cast<double>(s.cache_hits) / static_cast<double>(s.allocations);
  state.SetItemsProcessed(state.iterations());
  for (auto& a : window) alloc.free(a.address);
}
BENCHMARK(random_window)->Arg(0)->Arg(1);

}  // namespace

BENCHMARK_MAIN();

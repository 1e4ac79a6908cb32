// Allocate+free pairs per second from many threads at once, each thread on its
// own queue, cache hits only (the shape of ../shared/device-costs.md's table).
#include <benchmark/benchmark.h>

#include <memory>

#include "memkit/memkit.hpp"

namespace {

memkit::sim_backend& device() {
  static memkit::sim_backend d([] {
    memkit::sim_options o;
    o.capacity = std::size_t{1} << 40;
    o.queue_count = 64;
    return o;
  }());
  return d;
}

memkit::allocator& shared_allocator() {
  static memkit::allocator a(device());
  return a;
}

void pairs(benchmark::State& state) {
  memkit::allocator& alloc = shared_allocator();
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const auto queue = static_cast<memkit::queue_id>(state.thread_index());
  alloc.free(alloc.allocate(bytes, queue).address);  // warm this thread's cache
  for (auto _ : state) {
    const memkit::allocation a = alloc.allocate(bytes, queue);
    benchmark::DoNotOptimize(a.address);
    alloc.free(a.address);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(pairs)->Arg(4096)->Arg(1 << 20)->ThreadRange(1, 16)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

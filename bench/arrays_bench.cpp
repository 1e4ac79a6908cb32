// Costs of the arrays layer: handle creation, binding (dispatch + placement at
// submit), and the memory the WebGPU usage-scope rule costs on random graphs
// against no rule and against one buffer per tensor.
#include <benchmark/benchmark.h>

#include "../tests/arrays/random_graph.hpp"
#include "memkit/arrays/context.hpp"
#include "memkit/arrays/encoder.hpp"
#include "memkit/memkit.hpp"

namespace {

using namespace memkit;
using namespace memkit::arrays;

void BM_handle_empty(benchmark::State& state) {
  sim_backend device;
  allocator memory(device);
  context arrays(memory);
  for (auto _ : state) {
    handle h = arrays.empty(4096);
    benchmark::DoNotOptimize(h.get_id());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_handle_empty);

void BM_handle_copy(benchmark::State& state) {
  sim_backend device;
  allocator memory(device);
  context arrays(memory);
  handle h = arrays.empty(4096);
  for (auto _ : state) {
    handle second = h;
    benchmark::DoNotOptimize(second.can_mut());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_handle_copy);

// A batch of range(0) dispatches, each reading two live tensors and writing a new
// one (the oldest dropped), then submit: per dispatch, recording, placement under
// the rule, release, and the submit itself (a sim fence).
void BM_dispatch_submit(benchmark::State& state) {
  const auto rule = static_cast<aliasing_rule>(state.range(1));
  sim_backend device;
  allocator memory(device);
  context arrays(memory, {.rule = rule});
  encoder work(arrays, [&](const batch&) { return device.submit(0); });
  std::vector<handle> live;
  for (int i = 0; i < 8; ++i) {
    live.push_back(arrays.empty(16384));
    work.dispatch({"fill", {1}}, {{live.back(), access::write}});
  }
  work.submit();
  std::size_t next = 0;
  for (auto _ : state) {
    for (std::int64_t d = 0; d < state.range(0); ++d) {
      handle out = arrays.empty(16384);
      work.dispatch({"add", {}}, {{live[next % 8], access::read},
                                  {live[(next + 3) % 8], access::read},
                                  {out, access::write}});
      live[next % 8] = std::move(out);
      ++next;
    }
    work.submit();
    if (next % 4096 == 0) device.complete_all();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.counters["relocations"] = static_cast<double>(arrays.get_statistics().relocations);
}
BENCHMARK(BM_dispatch_submit)
    ->ArgsProduct({{1, 16, 64}, {0, 1}})
    ->ArgNames({"dispatches", "webgpu_rule"});

// Peak memory over the same random graphs: range(0) = 0 no rule, 1 WebGPU rule,
// 2 one buffer per tensor; range(1) = largest shared buffer in MiB; range(2) = 1
// shared buffers grow with the pool (the default), 0 every shared buffer is the
// largest size (min_buffer_bytes = 0); range(3) = tensor size scale (1: tensors up
// to 4 MiB, working sets of tens of MiB; 16: up to 64 MiB); range(4) = 1 the
// allocator's segments policy (no virtual memory, as on WebGPU), 0 its default.
void BM_graph_memory(benchmark::State& state) {
  const std::int64_t mode = state.range(0);
  const auto buffer_bytes = static_cast<std::size_t>(state.range(1)) << 20;
  const bool growing = state.range(2) != 0;
  const auto scale = static_cast<std::size_t>(state.range(3));
  const allocator_options allocator_settings{
      .policy = state.range(4) != 0 ? pool_policy::segments : pool_policy::automatic};
  const std::size_t graphs = 300;
  memkit::arrays::testing::graph_options shapes;
  for (std::size_t& elements : shapes.shapes) elements *= scale;
  std::size_t peak_reserved = 0, peak_buffers = 0, peak_requested = 0;
  std::uint64_t relocations = 0, copies = 0, copied = 0, buffers_created = 0, dispatches = 0;
  std::uint64_t rule_buffers = 0;
  for (auto _ : state) {
    peak_reserved = peak_buffers = peak_requested = 0;
    relocations = copies = copied = buffers_created = dispatches = rule_buffers = 0;
    for (std::uint64_t seed = 1; seed <= graphs; ++seed) {
      sim_backend device;
      allocator memory(device, allocator_settings);
      context_options options{
          .rule = mode == 0 ? aliasing_rule::none : aliasing_rule::webgpu_usage_scope,
          .buffer_bytes = buffer_bytes,
          .buffer_per_tensor = mode == 2};
      if (!growing) options.min_buffer_bytes = 0;
      context arrays(memory, options);
      encoder work(arrays, [&](const batch& b) {
        dispatches += b.dispatches.size();
        return device.submit(0);
      });
      memkit::arrays::testing::run_random_graph(seed, arrays, work, shapes);
      const context_statistics s = arrays.get_statistics();
      peak_reserved += memory.get_statistics().peak_reserved_bytes;
      peak_buffers += s.peak_buffer_bytes;
      peak_requested += s.peak_requested_bytes;
      relocations += s.relocations;
      copies += s.relocation_copies;
      copied += s.relocated_bytes;
      buffers_created += s.buffers_created;
      rule_buffers += s.rule_buffers;
    }
  }
  const double mib = 1 << 20;
  state.counters["peak_reserved_MiB"] = static_cast<double>(peak_reserved) / mib;
  state.counters["peak_buffer_MiB"] = static_cast<double>(peak_buffers) / mib;
  state.counters["peak_requested_MiB"] = static_cast<double>(peak_requested) / mib;
  state.counters["dispatches"] = static_cast<double>(dispatches);
  state.counters["relocations"] = static_cast<double>(relocations);
  state.counters["relocation_copies"] = static_cast<double>(copies);
  state.counters["copied_MiB"] = static_cast<double>(copied) / mib;
  state.counters["buffers_created"] = static_cast<double>(buffers_created);
  state.counters["rule_buffers"] = static_cast<double>(rule_buffers);
}
// One buffer per tensor ignores the shared-buffer settings: run it once per scale.
// The segments policy only with growing buffers.
void graph_memory_arguments(benchmark::internal::Benchmark* b) {
  for (std::int64_t segments : {0, 1}) {
    for (std::int64_t scale : {1, 16}) {
      for (std::int64_t growing : {1, 0}) {
        if (segments && !growing) continue;
        for (std::int64_t buffer_mib : {4, 16, 64}) {
          for (std::int64_t mode : {0, 1}) b->Args({mode, buffer_mib, growing, scale, segments});
        }
      }
      b->Args({2, 16, 1, scale, segments});
    }
  }
}
BENCHMARK(BM_graph_memory)
    ->Apply(graph_memory_arguments)
    ->ArgNames({"mode", "buffer_MiB", "growing", "scale", "segments"})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

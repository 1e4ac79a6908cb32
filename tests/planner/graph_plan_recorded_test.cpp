// Recorded graphs: the random kernel graphs of tests/arrays run through an arrays
// context (the online allocator), recorded dispatch by dispatch, then planned. The
// plans must be valid, and the WebGPU split must keep the rule; the memory of the
// planned and online runs is printed side by side (docs/BENCHMARKS.md takes it).
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <set>
#include <span>
#include <vector>

#include "arrays/random_graph.hpp"
#include "memkit/graph_plan.hpp"
#include "memkit/memkit.hpp"

namespace memkit::planner {
namespace {

using arrays::aliasing_rule;

struct recorded_run {
  kernel_graph graph;
  std::size_t peak_reserved_bytes = 0;   // the allocator's, online
  std::size_t peak_requested_bytes = 0;  // handles' own bytes live at once, online
};

// Runs graph `seed` online and records its dispatches (not the copies the encoder
// inserts to move bindings: those belong to the online placement, not to the graph).
// The handles alive at the end are the graph's results, held by the caller; every
// other handle dies at its last use and had one owner there.
recorded_run record(std::uint64_t seed, aliasing_rule rule) {
  sim_backend device;
  allocator memory(device);
  arrays::context online(memory, {.rule = rule});
  recorded_run run;
  std::map<arrays::handle_id, std::size_t> tensor_of;
  const auto tensor = [&](const arrays::bound_range& r) {
    const auto [it, added] = tensor_of.emplace(r.handle, run.graph.tensors.size());
    if (added) {
      run.graph.tensors.push_back(graph_tensor{static_cast<std::int64_t>(r.size), false, true});
    }
    return it->second;
  };
  arrays::encoder work(online, [&](const arrays::batch& b) {
    for (const arrays::dispatch_record& d : b.dispatches) {
      if (d.relocation) continue;
      graph_kernel kernel{d.work.name, {}};
      for (const arrays::bound_range& r : d.bindings) {
        kernel.bindings.push_back(graph_binding{tensor(r), r.use});
      }
      run.graph.kernels.push_back(std::move(kernel));
    }
    return device.submit(0);
  });
  {
    const std::vector<arrays::handle> results =
        arrays::testing::run_random_graph(seed, online, work);
    work.submit();
    for (const arrays::handle& h : results) {
      if (const auto it = tensor_of.find(h.get_id()); it != tensor_of.end()) {
        run.graph.tensors[it->second].held_by_caller = true;
        run.graph.tensors[it->second].can_mut = false;
      }
    }
  }
  run.peak_reserved_bytes = memory.get_statistics().peak_reserved_bytes;
  run.peak_requested_bytes = online.get_statistics().peak_requested_bytes;
  return run;
}

TEST(GraphPlanRecorded, PlansOfRecordedGraphsAreValidAndKeepTheRule) {
  const std::uint64_t graphs = 300;
  double online_plain = 0;
  double online_rule = 0;
  double floor = 0;
  double planned_plain = 0;
  double planned_no_in_place = 0;
  double planned_rule = 0;
  std::size_t rule_buffers = 0;
  for (std::uint64_t seed = 1; seed <= graphs; ++seed) {
    const recorded_run plain_run = record(seed, aliasing_rule::none);
    const recorded_run rule_run = record(seed, aliasing_rule::webgpu_usage_scope);
    if (plain_run.graph.kernels.empty()) continue;
    graph_plan_options settings;
    settings.time_limit_seconds = 0.2;
    const graph_plan plain = plan_graph(plain_run.graph, settings);
    settings.in_place = false;
    const graph_plan no_in_place = plan_graph(plain_run.graph, settings);
    settings.webgpu_usage_scope = true;
    const graph_plan split = plan_graph(plain_run.graph, settings);
    ASSERT_TRUE(validate_graph_plan(plain_run.graph, plain, false).ok) << "seed " << seed;
    ASSERT_TRUE(validate_graph_plan(plain_run.graph, split, true).ok) << "seed " << seed;
    online_plain += static_cast<double>(plain_run.peak_reserved_bytes);
    online_rule += static_cast<double>(rule_run.peak_reserved_bytes);
    floor += static_cast<double>(plain_run.peak_requested_bytes);
    planned_plain += static_cast<double>(plain.total_bytes());
    planned_no_in_place += static_cast<double>(no_in_place.total_bytes());
    planned_rule += static_cast<double>(split.total_bytes());
    rule_buffers += split.buffer_bytes.size();
  }
  const double mib = 1 << 20;
  std::printf(
      "[ memory  ] %llu random graphs, sums of peaks (MiB): online floor (peak requested) "
      "%.0f; online reserved: no rule %.0f, WebGPU rule %.0f; planned: one buffer %.0f "
      "(%.0f without in-place), WebGPU split %.0f in %.1f buffers a graph\n",
      static_cast<unsigned long long>(graphs), floor / mib, online_plain / mib, online_rule / mib,
      planned_plain / mib, planned_no_in_place / mib, planned_rule / mib,
      static_cast<double>(rule_buffers) / static_cast<double>(graphs));
  EXPECT_GT(planned_rule, 0.0);
}

}  // namespace
}  // namespace memkit::planner

// Planning kernel graphs: valid plans on random graphs that compute the same values as
// one allocation per tensor, in-place reuse lowering the peak, the WebGPU split
// clearing every usage-scope violation the one-buffer plan has, and a validator that
// catches broken plans.
#include "memkit/graph_plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "memkit/arrays/binding.hpp"
#include "memkit/arrays/usage_scope.hpp"

namespace memkit::planner {
namespace {

using arrays::access;

// A random graph: a few inputs held by the caller; each kernel reads one to three
// tensors made earlier (sometimes updating one in place with read_write) and writes
// one or two new ones; the last tensors made are outputs held by the caller.
kernel_graph random_graph(std::mt19937& rng, std::size_t kernels) {
  kernel_graph graph;
  std::uniform_int_distribution<std::int64_t> bytes(1, 64 * 1024);
  std::bernoulli_distribution coin(0.7);
  for (int i = 0; i < 3; ++i) graph.tensors.push_back(graph_tensor{bytes(rng), true, false});
  for (std::size_t k = 0; k < kernels; ++k) {
    graph_kernel kernel;
    kernel.name = "k" + std::to_string(k);
    // Mostly recent tensors, as a framework's graph reads what it just made.
    const std::size_t made = graph.tensors.size();
    std::uniform_int_distribution<std::size_t> recent(made > 8 ? made - 8 : 0, made - 1);
    const int reads = 1 + static_cast<int>(rng() % 3);
    for (int r = 0; r < reads; ++r) {
      const std::size_t t = recent(rng);
      bool bound = false;
      for (const graph_binding& b : kernel.bindings) bound = bound || b.tensor == t;
      if (bound) continue;
      const bool update = rng() % 8 == 0 && !graph.tensors[t].held_by_caller;
      kernel.bindings.push_back(graph_binding{t, update ? access::read_write : access::read});
    }
    const int writes = 1 + static_cast<int>(rng() % 2);
    for (int w = 0; w < writes; ++w) {
      kernel.bindings.push_back(graph_binding{graph.tensors.size(), access::write});
      graph.tensors.push_back(graph_tensor{bytes(rng), false, coin(rng)});
    }
    graph.kernels.push_back(std::move(kernel));
  }
  for (std::size_t t = graph.tensors.size() - 2; t < graph.tensors.size(); ++t) {
    graph.tensors[t].held_by_caller = true;
  }
  return graph;
}

// Runs the graph on the CPU: each byte a kernel writes is the kernel's index plus the
// same byte (wrapping) of every tensor it reads. `bytes_of` gives a tensor's memory.
template <typename BytesOf>
void run_graph(const kernel_graph& graph, BytesOf&& bytes_of) {
  for (std::size_t k = 0; k < graph.kernels.size(); ++k) {
    const graph_kernel& kernel = graph.kernels[k];
    // Elementwise: byte j of every output is computed from byte j of the sources (0
    // past a source's end) before any byte j is written, so an output written over
    // its in-place input reads each byte before it is overwritten.
    std::size_t widest = 0;
    for (const graph_binding& out : kernel.bindings) {
      if (arrays::is_writable(out.use)) widest = std::max(widest, bytes_of(out.tensor).size());
    }
    std::vector<std::uint8_t> values;
    for (std::size_t j = 0; j < widest; ++j) {
      values.clear();
      for (const graph_binding& out : kernel.bindings) {
        if (!arrays::is_writable(out.use)) continue;
        std::uint8_t value = static_cast<std::uint8_t>(k + out.tensor);
        for (const graph_binding& in : kernel.bindings) {
          // Sources: what it reads, and its own old bytes when it updates in place.
          const bool source =
              in.use == access::read || (in.use == access::read_write && in.tensor == out.tensor);
          if (!source) continue;
          const std::span<std::uint8_t> bytes = bytes_of(in.tensor);
          if (j < bytes.size()) value = static_cast<std::uint8_t>(value + bytes[j]);
        }
        values.push_back(value);
      }
      std::size_t next = 0;
      for (const graph_binding& out : kernel.bindings) {
        if (!arrays::is_writable(out.use)) continue;
        const std::span<std::uint8_t> target = bytes_of(out.tensor);
        if (j < target.size()) target[j] = values[next];
        ++next;
      }
    }
  }
}

std::vector<std::vector<std::uint8_t>> run_with_one_allocation_per_tensor(
    const kernel_graph& graph) {
  std::vector<std::vector<std::uint8_t>> memory;
  for (std::size_t t = 0; t < graph.tensors.size(); ++t) {
    memory.emplace_back(static_cast<std::size_t>(graph.tensors[t].bytes),
                        static_cast<std::uint8_t>(t * 7 + 1));
  }
  run_graph(graph, [&](std::size_t t) { return std::span<std::uint8_t>(memory[t]); });
  return memory;
}

std::size_t count_usage_violations(const kernel_graph& graph, const graph_plan& plan) {
  std::size_t violations = 0;
  for (std::size_t k = 0; k < graph.kernels.size(); ++k) {
    std::vector<arrays::bound_range> ranges;
    for (const graph_binding& b : graph.kernels[k].bindings) {
      ranges.push_back(
          arrays::bound_range{b.tensor, plan.placements[b.tensor].buffer,
                              static_cast<std::uint64_t>(plan.placements[b.tensor].offset),
                              static_cast<std::uint64_t>(graph.tensors[b.tensor].bytes), b.use});
    }
    violations += arrays::check_usage_scope(std::span<const arrays::bound_range>(ranges), k).size();
  }
  return violations;
}

graph_plan_options fast(bool webgpu) {
  graph_plan_options o;
  o.webgpu_usage_scope = webgpu;
  o.time_limit_seconds = 0.01;
  return o;
}

TEST(GraphPlan, PlannedRunsComputeWhatOneAllocationPerTensorComputes) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 40; ++trial) {
    const kernel_graph graph = random_graph(rng, 10 + trial);
    const std::vector<std::vector<std::uint8_t>> expected =
        run_with_one_allocation_per_tensor(graph);
    for (const bool webgpu : {false, true}) {
      const graph_plan plan = plan_graph(graph, fast(webgpu));
      ASSERT_TRUE(validate_graph_plan(graph, plan, webgpu).ok);
      // The caller allocates each buffer once; running needs no other memory.
      std::vector<std::vector<std::uint8_t>> buffers;
      for (const std::int64_t size : plan.buffer_bytes) {
        buffers.emplace_back(static_cast<std::size_t>(size), std::uint8_t{0});
      }
      const auto bytes_of = [&](std::size_t t) {
        const tensor_placement& p = plan.placements[t];
        return std::span<std::uint8_t>(buffers[p.buffer])
            .subspan(static_cast<std::size_t>(p.offset),
                     static_cast<std::size_t>(graph.tensors[t].bytes));
      };
      for (std::size_t t = 0; t < 3; ++t) {  // the inputs' values
        std::span<std::uint8_t> input = bytes_of(t);
        std::fill(input.begin(), input.end(), static_cast<std::uint8_t>(t * 7 + 1));
      }
      run_graph(graph, bytes_of);
      for (std::size_t t = graph.tensors.size() - 2; t < graph.tensors.size(); ++t) {
        const std::span<std::uint8_t> got = bytes_of(t);
        ASSERT_TRUE(std::equal(got.begin(), got.end(), expected[t].begin()))
            << "trial " << trial << " webgpu " << webgpu << " output " << t;
      }
      EXPECT_GE(plan.total_bytes(), plan.load_bytes);
    }
  }
}

TEST(GraphPlan, InPlaceReuseLowersThePeakOfAChain) {
  // fill -> t0 -> relu -> t1 -> ... -> t9, the output the caller keeps; every tensor
  // 1 MiB, the intermediates with one owner (they may be written over).
  kernel_graph graph;
  const std::int64_t mib = 1 << 20;
  for (int i = 0; i < 9; ++i) graph.tensors.push_back(graph_tensor{mib, false, true});
  graph.tensors.push_back(graph_tensor{mib, true, false});
  graph.kernels.push_back(graph_kernel{"fill", {graph_binding{0, access::write}}});
  for (std::size_t k = 0; k + 1 < graph.tensors.size(); ++k) {
    graph.kernels.push_back(graph_kernel{
        "relu", {graph_binding{k, access::read}, graph_binding{k + 1, access::write}}});
  }
  graph_plan_options plain;
  plain.in_place = false;
  const graph_plan without = plan_graph(graph, plain);
  const graph_plan with = plan_graph(graph, graph_plan_options{});
  ASSERT_TRUE(validate_graph_plan(graph, with, false).ok);
  EXPECT_EQ(without.total_bytes(), 2 * mib);  // each kernel's input and output
  EXPECT_EQ(with.total_bytes(), 1 * mib);     // the whole chain in one slot
  EXPECT_EQ(with.in_place.size(), 9u);

  // A tensor the caller holds is never written over: with t0 held, the chain starts
  // at t1 and t0 keeps its own bytes.
  graph.tensors[0].held_by_caller = true;
  const graph_plan held = plan_graph(graph, graph_plan_options{});
  EXPECT_EQ(held.total_bytes(), 2 * mib);
  for (const in_place_pair& p : held.in_place) {
    EXPECT_FALSE(graph.tensors[p.input].held_by_caller);
  }
}

TEST(GraphPlan, WebGpuSplitClearsTheViolationsOfOneBuffer) {
  std::mt19937 rng(29);
  std::size_t plain_violations = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const kernel_graph graph = random_graph(rng, 30);
    const graph_plan split = plan_graph(graph, fast(true));
    EXPECT_EQ(count_usage_violations(graph, split), 0u) << "trial " << trial;
    EXPECT_GT(split.buffer_bytes.size(), 1u);
    const graph_plan plain = plan_graph(graph, fast(false));
    EXPECT_EQ(plain.buffer_bytes.size(), 1u);
    plain_violations += count_usage_violations(graph, plain);
    EXPECT_FALSE(validate_graph_plan(graph, plain, true).ok);
  }
  EXPECT_GT(plain_violations, 0u);  // the check can fail
}

TEST(GraphPlan, ValidatorCatchesBrokenPlans) {
  std::mt19937 rng(31);
  const kernel_graph graph = random_graph(rng, 20);
  graph_plan_options no_pairs = fast(false);
  no_pairs.in_place = false;  // so that any overlap made below is unsanctioned
  const graph_plan good = plan_graph(graph, no_pairs);
  ASSERT_TRUE(validate_graph_plan(graph, good, false).ok);

  // Two tensors of one kernel moved onto the same bytes.
  graph_plan clash = good;
  const graph_kernel& kernel = graph.kernels[5];
  clash.placements[kernel.bindings.back().tensor] =
      clash.placements[kernel.bindings.front().tensor];
  const validation caught = validate_graph_plan(graph, clash, false);
  EXPECT_FALSE(caught.ok);
  EXPECT_NE(caught.message.find("share bytes"), std::string::npos) << caught.message;

  // A tensor outside its buffer.
  graph_plan outside = good;
  outside.placements[0].offset = good.buffer_bytes[0];
  EXPECT_FALSE(validate_graph_plan(graph, outside, false).ok);

  // An in-place pair the graph does not allow: an input held by the caller.
  graph_plan held = good;
  held.in_place.push_back(in_place_pair{0, 0, graph.kernels[0].bindings.back().tensor});
  EXPECT_FALSE(validate_graph_plan(graph, held, false).ok);
}

TEST(GraphPlan, RejectsMalformedGraphs) {
  kernel_graph graph;
  graph.tensors.push_back(graph_tensor{16, false, false});
  graph.kernels.push_back(graph_kernel{"bad", {graph_binding{3, access::read}}});
  EXPECT_THROW(plan_graph(graph), planner_error);
  graph.kernels.front().bindings.front().tensor = 0;
  graph.tensors.front().bytes = 0;
  EXPECT_THROW(plan_graph(graph), planner_error);
  graph.tensors.front().bytes = 16;
  graph.tensors.push_back(graph_tensor{16, false, false});  // bound by no kernel
  EXPECT_THROW(plan_graph(graph), planner_error);
}

}  // namespace
}  // namespace memkit::planner

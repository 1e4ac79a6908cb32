// Property tests over thousands of random kernel graphs: with deferred binding
// under the WebGPU rule no dispatch breaks the usage-scope rule; the same graphs
// placed without the rule (a plain sub-allocator sharing buffers) break it, so
// the check can fail. Also exports plans for integrations/webgpu when asked.
#include "arrays/random_graph.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <set>

#include "memkit/arrays/plan.hpp"
#include "memkit/arrays/usage_scope.hpp"
#include "memkit/memkit.hpp"

namespace memkit::arrays {
namespace {

struct graph_run {
  std::size_t dispatches = 0;
  std::size_t violations = 0;
  std::size_t violating_graphs = 0;
};

// Live handles whose bytes overlap (a placement bug: one kernel's output would
// overwrite another handle's values).
std::size_t count_overlaps(const std::vector<handle>& live) {
  std::vector<buffer_range> ranges;
  std::set<handle_id> seen;
  for (const handle& h : live) {
    if (!seen.insert(h.get_id()).second) continue;  // a second owner of one handle
    if (std::optional<buffer_range> r = h.get_range()) ranges.push_back(*r);
  }
  std::size_t overlaps = 0;
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    for (std::size_t j = i + 1; j < ranges.size(); ++j) {
      const buffer_range& a = ranges[i];
      const buffer_range& b = ranges[j];
      overlaps +=
          a.buffer == b.buffer && a.offset < b.offset + b.size && b.offset < a.offset + a.size;
    }
  }
  return overlaps;
}

graph_run run_graphs(const context_options& context_settings, std::uint64_t first_seed,
                     std::size_t graphs, const testing::graph_options& options) {
  graph_run total;
  for (std::size_t g = 0; g < graphs; ++g) {
    sim_backend device;
    allocator memory(device);
    context arrays(memory, context_settings);
    std::size_t violations = 0;
    encoder work(arrays, [&](const batch& b) {
      total.dispatches += b.dispatches.size();
      violations += check_usage_scope(std::span<const dispatch_record>(b.dispatches)).size();
      return device.submit(0);
    });
    {
      std::vector<handle> results =
          testing::run_random_graph(first_seed + g, arrays, work, options);
      EXPECT_LE(arrays.get_statistics().requested_bytes, arrays.get_statistics().live_bytes);
      EXPECT_EQ(count_overlaps(results), 0u) << "seed " << first_seed + g;
    }
    // Every handle gone: every byte is back.
    EXPECT_EQ(arrays.get_statistics().live_bytes, 0u) << "seed " << first_seed + g;
    total.violations += violations;
    total.violating_graphs += violations > 0;
  }
  return total;
}

testing::graph_options small_graphs() {
  testing::graph_options o;
  o.shapes = {16, 64, 1000, 4096, 16384, 65536};
  o.max_steps = 80;
  return o;
}

constexpr std::size_t MiB = std::size_t{1} << 20;

TEST(random_graphs, deferred_binding_never_breaks_the_webgpu_rule) {
  // 1 MiB buffers: many handles share each one, so the rule excludes often.
  const graph_run run = run_graphs({.rule = aliasing_rule::webgpu_usage_scope, .buffer_bytes = MiB},
                                   1, 3000, small_graphs());
  EXPECT_EQ(run.violations, 0u);
  EXPECT_GT(run.dispatches, 3000u * 20u);
}

TEST(random_graphs, growing_buffers_keep_the_rule) {
  const graph_run run =
      run_graphs({.rule = aliasing_rule::webgpu_usage_scope}, 1, 3000, small_graphs());
  EXPECT_EQ(run.violations, 0u);
}

TEST(random_graphs, large_tensors_and_dedicated_buffers_keep_the_rule) {
  const graph_run run =
      run_graphs({.rule = aliasing_rule::webgpu_usage_scope, .buffer_bytes = 16 * MiB}, 100000, 500,
                 testing::graph_options{});
  EXPECT_EQ(run.violations, 0u);
}

TEST(random_graphs, a_plain_sub_allocator_breaks_the_rule_on_the_same_graphs) {
  const graph_run run =
      run_graphs({.rule = aliasing_rule::none, .buffer_bytes = MiB}, 1, 3000, small_graphs());
  EXPECT_GT(run.violations, 0u);
  EXPECT_GT(run.violating_graphs, 3000u / 2) << "most graphs would fail on WebGPU";
}

TEST(random_graphs, one_buffer_per_tensor_never_breaks_the_rule) {
  testing::graph_options o = small_graphs();
  std::size_t violations = 0;
  for (std::uint64_t seed = 1; seed <= 300; ++seed) {
    sim_backend device;
    allocator memory(device);
    context arrays(memory, {.rule = aliasing_rule::webgpu_usage_scope, .buffer_per_tensor = true});
    encoder work(arrays, [&](const batch& b) {
      violations += check_usage_scope(std::span<const dispatch_record>(b.dispatches)).size();
      return device.submit(0);
    });
    testing::run_random_graph(seed, arrays, work, o);
  }
  EXPECT_EQ(violations, 0u);
}

// Sum over graphs of the allocator's peak reserved bytes.
std::size_t calculate_peak_reserved(const context_options& options, std::size_t graphs) {
  std::size_t total = 0;
  for (std::uint64_t seed = 1; seed <= graphs; ++seed) {
    sim_backend device;
    allocator memory(device);
    context arrays(memory, options);
    encoder work(arrays, [&](const batch&) { return device.submit(0); });
    testing::run_random_graph(seed, arrays, work);
    total += memory.get_statistics().peak_reserved_bytes;
  }
  return total;
}

TEST(random_graphs, the_webgpu_rule_costs_at_most_5_percent_more_memory) {
  const std::size_t graphs = 200;
  for (std::size_t buffer_mib : {4, 64}) {
    context_options none{.rule = aliasing_rule::none, .buffer_bytes = buffer_mib << 20};
    context_options webgpu = none;
    webgpu.rule = aliasing_rule::webgpu_usage_scope;
    const auto without_rule = static_cast<double>(calculate_peak_reserved(none, graphs));
    const auto with_rule = static_cast<double>(calculate_peak_reserved(webgpu, graphs));
    EXPECT_LE(with_rule, 1.05 * without_rule) << buffer_mib << " MiB buffers";
    // Against one buffer per tensor, what a framework does on the web without this.
    context_options per_tensor = webgpu;
    per_tensor.buffer_per_tensor = true;
    const auto one_each = static_cast<double>(calculate_peak_reserved(per_tensor, graphs));
    EXPECT_LE(with_rule, 1.05 * one_each) << buffer_mib << " MiB buffers";
  }
}

TEST(random_graphs, fixed_size_buffers_make_the_rule_cost_more) {
  // The measure can fail: with every shared buffer 64 MiB, an output excluded
  // from its inputs' buffer opens another 64 MiB.
  const std::size_t graphs = 50;
  context_options none{
      .rule = aliasing_rule::none, .buffer_bytes = std::size_t{64} << 20, .min_buffer_bytes = 0};
  context_options webgpu = none;
  webgpu.rule = aliasing_rule::webgpu_usage_scope;
  EXPECT_GT(static_cast<double>(calculate_peak_reserved(webgpu, graphs)),
            2.0 * static_cast<double>(calculate_peak_reserved(none, graphs)));
}

// Writes plans for integrations/webgpu: MEMKIT_WEBGPU_PLANS=dir.
TEST(random_graphs, export_plans_for_webgpu) {
  const char* dir = std::getenv("MEMKIT_WEBGPU_PLANS");
  if (!dir) GTEST_SKIP() << "set MEMKIT_WEBGPU_PLANS=dir to write plans for integrations/webgpu";
  // Seeds 1-20: small tensors, many in each buffer. 21-30: the full shape range
  // (up to 4 MiB), so buffers grow and the largest tensors get their own.
  testing::graph_options small;
  small.shapes = {16, 64, 1000, 4096, 16384, 65536};
  small.max_steps = 60;
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    const testing::graph_options o = seed <= 20 ? small : testing::graph_options{};
    for (aliasing_rule rule : {aliasing_rule::webgpu_usage_scope, aliasing_rule::none}) {
      sim_backend device;
      allocator memory(device);
      context arrays(memory, {.rule = rule});  // the default buffer sizes
      std::vector<batch> batches;
      encoder work(arrays, [&](const batch& b) {
        batches.push_back(b);
        return device.submit(0);
      });
      const std::vector<handle> results = testing::run_random_graph(seed, arrays, work, o);
      const std::string name = std::string(dir) + "/graph" + std::to_string(seed) + "_" +
                               (rule == aliasing_rule::none ? "naive" : "deferred") + ".json";
      std::ofstream(name) << export_plan(arrays, batches, results);
    }
  }
}

}  // namespace
}  // namespace memkit::arrays

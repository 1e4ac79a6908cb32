// Random kernel graphs run through an arrays context: shapes, fan-in, in-place
// writes, "zero it, then write it" chains, dropped and shared handles, and
// submits at random points. A seed gives the same graph whatever the context's
// rule, because every choice depends on the seed and on handle ownership only.
// Kernels (integrations/webgpu runs them for real, elementwise over the output):
//   fill [out write]                 out = arguments[0]
//   add  [in... read, out write]     out = sum of inputs (index i mod input length)
//   add  [in... read, out read_write] out += sum of inputs
//   copy [src read, dst write]       dst = src
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "memkit/arrays/context.hpp"
#include "memkit/arrays/encoder.hpp"

namespace memkit::arrays::testing {

struct graph_options {
  std::size_t min_steps = 20;
  std::size_t max_steps = 160;
  // Element counts (4-byte elements) tensors are drawn from.
  std::vector<std::size_t> shapes = {16, 64, 1000, 4096, 16384, 65536, 250000, 1u << 20};
  double submit_chance = 0.12;
};

// Runs one graph; returns the handles alive at the end (their values are the
// graph's results).
inline std::vector<handle> run_random_graph(std::uint64_t seed, context& target, encoder& work,
                                            const graph_options& options = {}) {
  std::mt19937_64 random(seed);
  auto uniform = [&](std::size_t n) {
    return static_cast<std::size_t>(std::uniform_int_distribution<std::size_t>(0, n - 1)(random));
  };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(random) < p; };
  auto tensor_bytes = [&] { return options.shapes[uniform(options.shapes.size())] * 4; };
  auto value = [&] { return static_cast<float>(uniform(7) + 1); };

  std::vector<handle> live;
  // Distinct inputs other than `skip`.
  auto pick_inputs = [&](std::size_t count, const handle* skip) {
    std::vector<handle> inputs;
    std::vector<std::size_t> order(live.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), random);
    for (std::size_t i : order) {
      if (inputs.size() == count) break;
      if (skip && live[i].get_id() == skip->get_id()) continue;
      bool seen = false;
      for (const handle& h : inputs) seen = seen || h.get_id() == live[i].get_id();
      if (!seen) inputs.push_back(live[i]);
    }
    return inputs;
  };
  auto add = [&](const std::vector<handle>& inputs, const handle& out, access use) {
    std::vector<binding> bindings;
    for (const handle& h : inputs) bindings.push_back({h, access::read});
    bindings.push_back({out, use});
    work.dispatch({"add", {}}, bindings);
  };

  const std::size_t steps = options.min_steps + uniform(options.max_steps - options.min_steps + 1);
  for (std::size_t step = 0; step < steps; ++step) {
    const double r = std::uniform_real_distribution<double>(0, 1)(random);
    if (live.size() < 3 || r < 0.15) {
      handle t = target.empty(tensor_bytes());
      work.dispatch({"fill", {value()}}, {{t, access::write}});
      live.push_back(std::move(t));
    } else if (r < 0.50) {
      const std::vector<handle> inputs = pick_inputs(1 + uniform(4), nullptr);
      handle out = target.empty(tensor_bytes());
      add(inputs, out, access::write);
      live.push_back(std::move(out));
    } else if (r < 0.65) {
      // In place over a tensor nobody else owns.
      handle& x = live[uniform(live.size())];
      if (x.can_mut()) {
        const std::vector<handle> inputs = pick_inputs(1 + uniform(3), &x);
        add(inputs, x, access::read_write);
      }
    } else if (r < 0.80) {
      // Zero it, then accumulate into it while reading a, b, c.
      handle out = target.empty(tensor_bytes());
      work.dispatch({"fill", {0.0f}}, {{out, access::write}});
      if (chance(0.25)) work.submit();
      add(pick_inputs(1 + uniform(3), nullptr), out, access::read_write);
      live.push_back(std::move(out));
    } else if (r < 0.88) {
      handle second = live[uniform(live.size())];  // a second owner: no longer can_mut
      live.push_back(std::move(second));
    } else {
      const std::size_t drop = uniform(live.size());
      live[drop] = std::move(live.back());
      live.pop_back();
    }
    if (chance(options.submit_chance)) work.submit();
  }
  work.submit();
  return live;
}

}  // namespace memkit::arrays::testing

// plan_graph() and validate_graph_plan() (memkit/graph_plan.hpp).
#include "memkit/graph_plan.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <span>
#include <stdexcept>

#include "common/helpers.hpp"
#include "memkit/arrays/binding.hpp"
#include "memkit/arrays/usage_scope.hpp"

namespace memkit::planner {
namespace {

constexpr std::size_t kNoKernel = std::numeric_limits<std::size_t>::max();

// Kernels are the clock: a tensor lives over [first, last] (inclusive); one held by
// the caller to the end of the graph, and from its start when it is an input.
struct lifetimes {
  std::vector<std::size_t> first;
  std::vector<std::size_t> last;
};

lifetimes calculate_lifetimes(const kernel_graph& graph, const char* function) {
  const std::size_t kernels = graph.kernels.size();
  lifetimes life{std::vector<std::size_t>(graph.tensors.size(), kNoKernel),
                 std::vector<std::size_t>(graph.tensors.size(), 0)};
  std::vector<char> read_first(graph.tensors.size(), 0);  // its first kernel reads it
  for (std::size_t k = 0; k < kernels; ++k) {
    for (const graph_binding& b : graph.kernels[k].bindings) {
      if (b.tensor >= graph.tensors.size()) {
        throw planner_error(std::string("[memkit::planner::") + function + "] kernel " +
                            std::to_string(k) + " (" + graph.kernels[k].name + ") binds tensor " +
                            std::to_string(b.tensor) + " of " +
                            std::to_string(graph.tensors.size()));
      }
      if (life.first[b.tensor] == kNoKernel) life.first[b.tensor] = k;
      if (life.first[b.tensor] == k && b.use != arrays::access::write) read_first[b.tensor] = 1;
      life.last[b.tensor] = std::max(life.last[b.tensor], k);
    }
  }
  for (std::size_t t = 0; t < graph.tensors.size(); ++t) {
    const graph_tensor& tensor = graph.tensors[t];
    if (tensor.bytes <= 0) {
      throw planner_error(std::string("[memkit::planner::") + function + "] tensor " +
                          std::to_string(t) + " has " + std::to_string(tensor.bytes) + " bytes");
    }
    if (tensor.held_by_caller) {
      // The caller keeps it after the graph; an input (read before anything writes
      // it) also holds its values from before the first kernel.
      if (life.first[t] == kNoKernel || read_first[t]) life.first[t] = 0;
      life.last[t] = kernels == 0 ? 0 : kernels - 1;
    } else if (life.first[t] == kNoKernel) {
      throw planner_error(std::string("[memkit::planner::") + function + "] tensor " +
                          std::to_string(t) + " is bound by no kernel and not held by the caller");
    }
  }
  return life;
}

// How kernel k binds tensor t: read only, written (write or read_write), or both kinds.
struct kernel_use {
  bool read = false;
  bool write_only = false;  // bound `write` (every byte overwritten)
  bool writable = false;
  int count = 0;
};

kernel_use use_in(const graph_kernel& kernel, std::size_t tensor) {
  kernel_use use;
  for (const graph_binding& b : kernel.bindings) {
    if (b.tensor != tensor) continue;
    ++use.count;
    use.read = use.read || b.use == arrays::access::read;
    use.write_only = use.write_only || b.use == arrays::access::write;
    use.writable = use.writable || arrays::is_writable(b.use);
  }
  return use;
}

// Whether `output` may take `input`'s bytes in kernel k (see the header).
bool may_share_in_place(const kernel_graph& graph, const lifetimes& life, std::size_t k,
                        std::size_t input, std::size_t output) {
  const graph_tensor& in = graph.tensors[input];
  // A held output may take the bytes (it then keeps them to the end); a held input not.
  if (input == output || in.held_by_caller || !in.can_mut) return false;
  if (life.last[input] != k || life.first[output] != k) return false;
  const kernel_use in_use = use_in(graph.kernels[k], input);
  const kernel_use out_use = use_in(graph.kernels[k], output);
  return in_use.count == 1 && in_use.read && out_use.count == 1 && out_use.write_only &&
         graph.tensors[input].bytes >= graph.tensors[output].bytes;
}

// Tensors joined by in-place pairs plan as one unit: a chain whose lifetimes follow
// each other, as large as its largest member.
struct unit_set {
  std::vector<std::size_t> unit_of;  // per tensor
  std::vector<buffer> units;         // lifetimes in kernels, [first, last + 1)
};

unit_set calculate_units(const kernel_graph& graph, const lifetimes& life,
                         const std::vector<in_place_pair>& pairs, std::int64_t alignment) {
  const std::size_t n = graph.tensors.size();
  std::vector<std::size_t> parent(n);
  std::iota(parent.begin(), parent.end(), std::size_t{0});
  const auto find = [&](std::size_t t) {
    while (parent[t] != t) t = parent[t] = parent[parent[t]];
    return t;
  };
  for (const in_place_pair& p : pairs) parent[find(p.output)] = find(p.input);
  unit_set set;
  set.unit_of.assign(n, 0);
  std::vector<std::size_t> unit_of_root(n, kNoKernel);
  for (std::size_t t = 0; t < n; ++t) {
    const std::size_t root = find(t);
    if (unit_of_root[root] == kNoKernel) {
      unit_of_root[root] = set.units.size();
      set.units.push_back(buffer{static_cast<std::int64_t>(set.units.size()),
                                 std::numeric_limits<std::int64_t>::max(), 0, 0});
    }
    const std::size_t u = unit_of_root[root];
    set.unit_of[t] = u;
    buffer& unit = set.units[u];
    unit.lower = std::min(unit.lower, static_cast<std::int64_t>(life.first[t]));
    unit.upper = std::max(unit.upper, static_cast<std::int64_t>(life.last[t]) + 1);
    unit.size = std::max(unit.size, common::round_up(graph.tensors[t].bytes, alignment));
  }
  return set;
}

// Colours for the usage-scope rule: a tensor a kernel writes gets a colour (buffer)
// that no other tensor of that kernel has. Among the allowed colours, each tensor
// takes the one whose peak grows least, so the buffers' peaks stay near the load.
std::vector<std::uint32_t> colour_for_usage_scope(const kernel_graph& graph, const unit_set& set) {
  const std::vector<buffer>& units = set.units;
  const std::size_t n = units.size();
  std::vector<std::vector<std::size_t>> conflicts(n);
  for (const graph_kernel& kernel : graph.kernels) {
    for (const graph_binding& w : kernel.bindings) {
      if (!arrays::is_writable(w.use)) continue;
      const std::size_t written = set.unit_of[w.tensor];
      for (const graph_binding& other : kernel.bindings) {
        const std::size_t bound = set.unit_of[other.tensor];
        if (bound == written) continue;
        conflicts[written].push_back(bound);
        conflicts[bound].push_back(written);
      }
    }
  }
  std::int64_t horizon = 1;
  for (const buffer& u : units) horizon = std::max(horizon, u.upper);
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (units[a].lower != units[b].lower) return units[a].lower < units[b].lower;
    return units[a].size > units[b].size;
  });
  constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
  std::vector<std::uint32_t> colour(n, kNone);
  std::vector<std::vector<std::int64_t>> live;  // per colour, per kernel: bytes
  std::vector<std::int64_t> peak;
  std::vector<char> banned;
  for (const std::size_t t : order) {
    banned.assign(live.size(), 0);
    for (const std::size_t other : conflicts[t]) {
      if (colour[other] != kNone) banned[colour[other]] = 1;
    }
    std::uint32_t best = kNone;
    std::int64_t best_growth = std::numeric_limits<std::int64_t>::max();
    for (std::uint32_t c = 0; c < live.size(); ++c) {
      if (banned[c]) continue;
      std::int64_t highest = 0;
      for (std::int64_t k = units[t].lower; k < units[t].upper; ++k) {
        highest = std::max(highest, live[c][static_cast<std::size_t>(k)]);
      }
      const std::int64_t growth = std::max<std::int64_t>(0, highest + units[t].size - peak[c]);
      if (growth < best_growth) {
        best_growth = growth;
        best = c;
      }
    }
    if (best == kNone) {
      best = static_cast<std::uint32_t>(live.size());
      live.emplace_back(static_cast<std::size_t>(horizon), 0);
      peak.push_back(0);
    }
    colour[t] = best;
    for (std::int64_t k = units[t].lower; k < units[t].upper; ++k) {
      std::int64_t& bytes = live[best][static_cast<std::size_t>(k)];
      bytes += units[t].size;
      peak[best] = std::max(peak[best], bytes);
    }
  }
  return colour;
}

validation graph_failure(std::string message) {
  return validation{false, "[memkit::planner::validate_graph_plan] " + std::move(message)};
}

}  // namespace

std::int64_t graph_plan::total_bytes() const {
  return std::accumulate(buffer_bytes.begin(), buffer_bytes.end(), std::int64_t{0});
}

graph_plan plan_graph(const kernel_graph& graph, const graph_plan_options& settings) {
  if (settings.alignment <= 0) {
    throw planner_error("[memkit::planner::plan_graph] alignment " +
                        std::to_string(settings.alignment) + " is not positive");
  }
  const lifetimes life = calculate_lifetimes(graph, "plan_graph");
  graph_plan planned_graph;

  // In-place pairs, kernel by kernel: each output takes the first input of its size
  // it may, and each input gives its bytes once.
  if (settings.in_place && !settings.webgpu_usage_scope) {
    std::vector<char> given(graph.tensors.size(), 0);
    std::vector<char> taken(graph.tensors.size(), 0);
    for (std::size_t k = 0; k < graph.kernels.size(); ++k) {
      for (const graph_binding& out : graph.kernels[k].bindings) {
        if (taken[out.tensor]) continue;
        std::size_t best = kNoKernel;
        for (const graph_binding& in : graph.kernels[k].bindings) {
          if (given[in.tensor] || !may_share_in_place(graph, life, k, in.tensor, out.tensor)) {
            continue;
          }
          // Only equal (aligned) sizes: the pair plans as one unit as large as the
          // input, so a smaller output would keep the input's size for its whole life.
          if (common::round_up(graph.tensors[in.tensor].bytes, settings.alignment) !=
              common::round_up(graph.tensors[out.tensor].bytes, settings.alignment)) {
            continue;
          }
          best = in.tensor;
          break;
        }
        if (best == kNoKernel) continue;
        given[best] = 1;
        taken[out.tensor] = 1;
        planned_graph.in_place.push_back(in_place_pair{k, best, out.tensor});
      }
    }
  }
  const unit_set units = calculate_units(graph, life, planned_graph.in_place, settings.alignment);
  planned_graph.load_bytes = load(instance{units.units});

  // One buffer, or one per colour under the usage-scope rule; each planned alone.
  std::vector<std::uint32_t> buffer_of(units.units.size(), 0);
  if (settings.webgpu_usage_scope) buffer_of = colour_for_usage_scope(graph, units);
  const std::uint32_t buffers =
      buffer_of.empty() ? 0 : *std::max_element(buffer_of.begin(), buffer_of.end()) + 1;
  std::vector<std::int64_t> unit_offset(units.units.size(), 0);
  planned_graph.buffer_bytes.assign(buffers, 0);
  for (std::uint32_t b = 0; b < buffers; ++b) {
    instance part;
    std::vector<std::size_t> members;
    for (std::size_t u = 0; u < units.units.size(); ++u) {
      if (buffer_of[u] != b) continue;
      members.push_back(u);
      part.buffers.push_back(units.units[u]);
    }
    options opts;
    opts.time_limit_seconds = settings.time_limit_seconds / buffers;
    const result planned = solve(part, opts);
    for (std::size_t j = 0; j < members.size(); ++j) {
      unit_offset[members[j]] = planned.best.offsets[j];
    }
    planned_graph.buffer_bytes[b] = planned.height_bytes;
  }
  planned_graph.placements.resize(graph.tensors.size());
  for (std::size_t t = 0; t < graph.tensors.size(); ++t) {
    const std::size_t u = units.unit_of[t];
    planned_graph.placements[t] = tensor_placement{buffer_of[u], unit_offset[u]};
  }
  if (const validation check =
          validate_graph_plan(graph, planned_graph, settings.webgpu_usage_scope);
      !check) {
    throw invariant_violation("[memkit::planner::plan_graph] the plan is invalid: " +
                              check.message);
  }
  return planned_graph;
}

validation validate_graph_plan(const kernel_graph& graph, const graph_plan& plan,
                               bool webgpu_usage_scope) {
  lifetimes life;
  try {
    life = calculate_lifetimes(graph, "validate_graph_plan");
  } catch (const planner_error& e) {
    return validation{false, e.what()};
  }
  const std::size_t n = graph.tensors.size();
  if (plan.placements.size() != n) {
    return graph_failure("the plan places " + std::to_string(plan.placements.size()) +
                         " tensors of " + std::to_string(n));
  }
  for (std::size_t t = 0; t < n; ++t) {
    const tensor_placement& p = plan.placements[t];
    if (p.buffer >= plan.buffer_bytes.size() || p.offset < 0 ||
        p.offset + graph.tensors[t].bytes > plan.buffer_bytes[p.buffer]) {
      return graph_failure("tensor " + std::to_string(t) + " (" +
                           std::to_string(graph.tensors[t].bytes) + " bytes at offset " +
                           std::to_string(p.offset) + ") lies outside buffer " +
                           std::to_string(p.buffer));
    }
  }
  // Sanctioned overlaps: each pair must be allowed and share its placement.
  std::vector<std::pair<std::size_t, std::size_t>> sanctioned;
  for (const in_place_pair& p : plan.in_place) {
    if (p.input >= n || p.output >= n || p.kernel >= graph.kernels.size() ||
        !may_share_in_place(graph, life, p.kernel, p.input, p.output)) {
      return graph_failure("in-place pair (tensor " + std::to_string(p.input) + " -> tensor " +
                           std::to_string(p.output) + " in kernel " + std::to_string(p.kernel) +
                           ") is not allowed");
    }
    sanctioned.emplace_back(std::min(p.input, p.output), std::max(p.input, p.output));
  }
  std::sort(sanctioned.begin(), sanctioned.end());
  const auto is_sanctioned = [&](std::size_t a, std::size_t b) {
    return std::binary_search(sanctioned.begin(), sanctioned.end(),
                              std::pair(std::min(a, b), std::max(a, b)));
  };
  // Kernel by kernel, the tensors live there by (buffer, offset): each must start at
  // or after the end of every earlier one, but for its in-place partner.
  std::vector<std::vector<std::size_t>> starting(graph.kernels.size() + 1);
  for (std::size_t t = 0; t < n; ++t) starting[life.first[t]].push_back(t);
  std::vector<std::size_t> live;
  for (std::size_t k = 0; k < graph.kernels.size(); ++k) {
    std::erase_if(live, [&](std::size_t t) { return life.last[t] < k; });
    live.insert(live.end(), starting[k].begin(), starting[k].end());
    std::sort(live.begin(), live.end(), [&](std::size_t a, std::size_t b) {
      const tensor_placement& x = plan.placements[a];
      const tensor_placement& y = plan.placements[b];
      if (x.buffer != y.buffer) return x.buffer < y.buffer;
      if (x.offset != y.offset) return x.offset < y.offset;
      return a < b;
    });
    // The two earlier tensors reaching furthest: one of them may be the partner.
    std::size_t reach_first = kNoKernel;
    std::size_t reach_second = kNoKernel;
    const auto end_of = [&](std::size_t t) {
      return plan.placements[t].offset + graph.tensors[t].bytes;
    };
    for (std::size_t j = 0; j < live.size(); ++j) {
      const std::size_t t = live[j];
      if (j > 0 && plan.placements[live[j - 1]].buffer != plan.placements[t].buffer) {
        reach_first = reach_second = kNoKernel;
      }
      for (const std::size_t other : {reach_first, reach_second}) {
        if (other == kNoKernel || end_of(other) <= plan.placements[t].offset) continue;
        if (is_sanctioned(t, other)) continue;
        return graph_failure("tensors " + std::to_string(other) + " and " + std::to_string(t) +
                             " are both live in kernel " + std::to_string(k) +
                             " and share bytes of buffer " +
                             std::to_string(plan.placements[t].buffer));
      }
      if (reach_first == kNoKernel || end_of(t) > end_of(reach_first)) {
        reach_second = reach_first;
        reach_first = t;
      } else if (reach_second == kNoKernel || end_of(t) > end_of(reach_second)) {
        reach_second = t;
      }
    }
  }
  if (webgpu_usage_scope) {
    for (std::size_t k = 0; k < graph.kernels.size(); ++k) {
      std::vector<arrays::bound_range> ranges;
      for (const graph_binding& b : graph.kernels[k].bindings) {
        ranges.push_back(arrays::bound_range{
            static_cast<arrays::handle_id>(b.tensor), plan.placements[b.tensor].buffer,
            static_cast<std::uint64_t>(plan.placements[b.tensor].offset),
            static_cast<std::uint64_t>(graph.tensors[b.tensor].bytes), b.use});
      }
      const std::vector<arrays::usage_violation> violations =
          arrays::check_usage_scope(std::span<const arrays::bound_range>(ranges), k);
      if (!violations.empty()) {
        return graph_failure("kernel " + std::to_string(k) + " (" + graph.kernels[k].name +
                             ") breaks the usage-scope rule: " + violations.front().message);
      }
    }
  }
  return validation{};
}

}  // namespace memkit::planner

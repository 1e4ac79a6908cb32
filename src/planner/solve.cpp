// solve(): the greedy floor, then the search, capacity by capacity; large instances
// that split, part by part (memkit/planner.hpp).
#include <algorithm>
#include <array>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "memkit/planner.hpp"
#include "planner/search.hpp"

namespace memkit::planner {
namespace {

using detail::clock;
using detail::search_status;

// Of the time limit, at most, for the repair of best fit; more on large instances,
// where each search node costs as much as a pass of best fit.
constexpr double kRepairShare = 0.25;
constexpr double kRepairShareLarge = 0.75;
constexpr std::size_t kLargeInstanceBuffers = 10000;
constexpr int kRepairStaleRounds = 16;  // rounds without a lower plan before giving up
// One group of more buffers than this is planned by a rolling horizon: best fit over
// it whole costs minutes (its square), and the search cannot start.
constexpr std::size_t kRollingHorizonBuffers = 250000;
constexpr std::size_t kRollingWindow = 5000;  // buffers a window

// The parts of an instance with their searches, and a way to try one capacity.
class planner_state {
 public:
  planner_state(const instance& inst, detail::decomposition split)
      : inst_(inst), split_(std::move(split)) {
    for (const detail::part& p : split_.parts) {
      std::vector<detail::floor_piece> floors;
      for (const std::size_t i : p.resting) {
        const buffer& b = inst.buffers[i];
        floors.push_back({b.lower, b.upper, split_.fixed_offsets[i] + b.size - p.base});
      }
      searches_.push_back(
          std::make_unique<detail::part_search>(inst, p.members, nullptr, 0, &floors));
    }
  }

  std::size_t part_count() const { return split_.parts.size(); }

  std::uint64_t nodes() const {
    std::uint64_t total = 0;
    for (const auto& s : searches_) total += s->nodes();
    return total;
  }

  // Looks for a plan of height <= capacity; fills `out` when found. The parts are
  // independent, so each is searched within what is left above its base.
  search_status attempt(std::int64_t capacity, clock::time_point deadline, plan& out) {
    out.offsets = split_.fixed_offsets;
    for (std::size_t i = 0; i < out.offsets.size(); ++i) {
      if (out.offsets[i] >= 0 && out.offsets[i] + inst_.buffers[i].size > capacity) {
        return search_status::infeasible;
      }
    }
    // Cheap refutation first: if any part's LOAD does not fit, nothing will.
    for (std::size_t k = 0; k < searches_.size(); ++k) {
      if (split_.parts[k].base + searches_[k]->part_load() > capacity) {
        return search_status::infeasible;
      }
    }
    search_status status = search_status::found;
    std::vector<std::int64_t> offsets;
    for (std::size_t k = 0; k < searches_.size(); ++k) {
      const detail::part& p = split_.parts[k];
      const search_status part_status = searches_[k]->run(capacity - p.base, deadline, offsets);
      if (part_status == search_status::infeasible) return part_status;
      if (part_status == search_status::stopped) {
        status = search_status::stopped;
        continue;  // a later part may still prove the capacity infeasible
      }
      for (std::size_t j = 0; j < p.members.size(); ++j) {
        out.offsets[p.members[j]] = p.base + offsets[j];
      }
    }
    return status;
  }

 private:
  const instance& inst_;
  detail::decomposition split_;
  std::vector<std::unique_ptr<detail::part_search>> searches_;
};

// Where the slots of the cache chains start (detail::chain_slots) decides how
// the buffers before them fit around them; these starts are tried, as shares of the
// instance's time span, with the spares in either place.
constexpr int kChainStarts = 16;
constexpr int kChainStartDivisor = 32;

// The lowest plan with the cache chains in fixed slots, best fit in size classes
// placing the rest. When it is lower than `plan_so_far`, replaces it and `order` (then
// without the fixed buffers) and returns the fixed offsets; otherwise returns none.
std::vector<std::int64_t> best_chain_slots(const instance& inst, std::int64_t goal,
                                           clock::time_point deadline,
                                           std::vector<std::size_t>& order, plan& plan_so_far) {
  const auto [first, last] = detail::calculate_time_span(inst);
  const std::vector<std::size_t> class_order = detail::size_class_sweep_order(inst);
  std::vector<std::int64_t> best_fixed;
  std::int64_t best_height = height(inst, plan_so_far);
  const detail::chain_slots slots(inst, goal);
  for (int k = 0; k < kChainStarts && clock::now() < deadline; ++k) {
    for (const bool spares_under_goal : {false, true}) {
      std::vector<std::int64_t> fixed =
          slots.offsets(first + (last - first) * k / kChainStartDivisor, spares_under_goal);
      if (std::all_of(fixed.begin(), fixed.end(), [](std::int64_t o) { return o < 0; })) {
        return best_fixed;  // no chains, or the spares do not suffice: no later start helps
      }
      std::vector<std::size_t> rest;
      for (const std::size_t i : class_order) {
        if (fixed[i] < 0) rest.push_back(i);
      }
      plan candidate = detail::greedy_in_order(inst, rest, deadline, &fixed);
      const std::int64_t candidate_height = height(inst, candidate);
      if (candidate_height < best_height && validate(inst, candidate)) {
        best_height = candidate_height;
        best_fixed = std::move(fixed);
        order = std::move(rest);
        plan_so_far = std::move(candidate);
      }
    }
  }
  return best_fixed;
}

double seconds_since(clock::time_point start) {
  return std::chrono::duration<double>(clock::now() - start).count();
}

result solve_impl(const instance& inst, const options& opts, std::int64_t enough, bool cut_bands,
                  bool climb, const std::vector<std::int64_t>* fixed = nullptr);

// Parts whose members, in canonical order, live at the same moments (from the part's
// first) and differ in size in at most one buffer in kSiblingSizeShare.
constexpr std::size_t kSiblingSizeShare = 16;
bool is_sibling(const std::vector<std::array<std::int64_t, 4>>& a, std::size_t a_members,
                const std::vector<std::array<std::int64_t, 4>>& b, std::size_t b_members) {
  if (a_members != b_members) return false;
  std::size_t differ = 0;
  for (std::size_t j = 0; j < a_members; ++j) {  // each key lists its members first
    if (a[j][0] != b[j][0] || a[j][1] != b[j][1]) return false;
    if (a[j][2] != b[j][2] && ++differ * kSiblingSizeShare > a_members) return false;
  }
  return true;
}

// A large instance that splits is planned part by part: each part gets its own best
// fit, repair and search (on a long schedule best fit over the whole instance costs
// a pass over every buffer per round, while a part's rounds cost only its own), in a
// share of the time left as large as its share of the buffers left. The parts lie
// side by side in time above their bases, so their plans together are one.

result solve_by_parts(const instance& inst, const options& opts, const detail::decomposition& split,
                      clock::time_point start, clock::time_point deadline, bool cut_bands,
                      bool climb) {
  result out;
  out.load_bytes = load(inst);
  out.parts = split.parts.size();
  out.best.offsets = split.fixed_offsets;
  std::int64_t greedy_height = 0;
  for (std::size_t i = 0; i < inst.buffers.size(); ++i) {
    if (split.fixed_offsets[i] >= 0)
      greedy_height = std::max(greedy_height, split.fixed_offsets[i] + inst.buffers[i].size);
  }
  // A loop's steps give parts that are the same but for a shift in time: each is
  // planned once. A part's shape: its buffers in a canonical order, with times from
  // the part's first moment.
  // A part over resting buffers plans them too, as fixed buffers cut to its time span
  // (its floor), listed after its members in the key: lower, upper, size and offset
  // above the base (-1 for members).
  struct shape {
    std::vector<std::size_t> order;                // members, canonical order
    std::vector<buffer> floor;                     // the resting buffers, cut to the part
    std::vector<std::int64_t> floor_offsets;       // theirs, above the part's base
    std::vector<std::array<std::int64_t, 4>> key;  // lower, upper, size, offset
  };
  std::vector<shape> shapes(split.parts.size());
  std::vector<std::size_t> planned_as(split.parts.size());              // the part planned for it
  std::unordered_map<std::uint64_t, std::vector<std::size_t>> by_hash;  // shapes planned
  for (std::size_t k = 0; k < split.parts.size(); ++k) {
    const std::vector<std::size_t>& members = split.parts[k].members;
    std::int64_t first = std::numeric_limits<std::int64_t>::max();
    std::int64_t last = std::numeric_limits<std::int64_t>::min();
    for (const std::size_t i : members) {
      first = std::min(first, inst.buffers[i].lower);
      last = std::max(last, inst.buffers[i].upper);
    }
    shape& sh = shapes[k];
    sh.order = members;
    std::sort(sh.order.begin(), sh.order.end(), [&](std::size_t a, std::size_t b) {
      const buffer& x = inst.buffers[a];
      const buffer& y = inst.buffers[b];
      if (x.lower != y.lower) return x.lower < y.lower;
      if (x.upper != y.upper) return x.upper < y.upper;
      if (x.size != y.size) return x.size < y.size;
      return a < b;
    });
    for (const std::size_t i : split.parts[k].resting) {
      const buffer& b = inst.buffers[i];
      const std::int64_t lower = std::max(b.lower, first);
      const std::int64_t upper = std::min(b.upper, last);
      if (lower >= upper) continue;
      sh.floor.push_back(buffer{b.id, lower, upper, b.size});
      sh.floor_offsets.push_back(split.fixed_offsets[i] - split.parts[k].base);
    }
    std::uint64_t hash = sh.order.size();
    const auto add_key = [&](const buffer& b, std::int64_t offset) {
      sh.key.push_back({b.lower - first, b.upper - first, b.size, offset});
      for (const std::int64_t v : sh.key.back())
        hash = detail::mix64(hash ^ static_cast<std::uint64_t>(v));
    };
    for (const std::size_t i : sh.order) add_key(inst.buffers[i], -1);
    for (std::size_t f = 0; f < sh.floor.size(); ++f) add_key(sh.floor[f], sh.floor_offsets[f]);
    planned_as[k] = k;
    std::vector<std::size_t>& same_hash = by_hash[hash];
    for (const std::size_t e : same_hash) {
      if (shapes[e].key == sh.key) {
        planned_as[k] = e;
        break;
      }
    }
    if (planned_as[k] == k) same_hash.push_back(k);
  }
  // Steps drawn from a few buckets (an image's aspect, a padded length) give parts
  // with the same lifetimes whose sizes differ in a few buffers: such a part is a
  // sibling of the first like it, which is searched with the time of them all, its plan
  // carried over to each sibling (see carry_plan). A sibling the carried plan leaves
  // higher than the first is searched on its own in the second round.
  std::vector<std::size_t> first_of(split.parts.size());  // the first part like it
  std::vector<bool> own_search(split.parts.size(), false);
  for (std::size_t k = 0; k < split.parts.size(); ++k) {
    first_of[k] = k;
    if (planned_as[k] != k) continue;
    for (std::size_t e = 0; e < k; ++e) {
      if (planned_as[e] == e && first_of[e] == e &&
          is_sibling(shapes[e].key, shapes[e].order.size(), shapes[k].key,
                     shapes[k].order.size())) {
        first_of[k] = e;
        break;
      }
    }
  }
  // A part's instance: its members in canonical order, then its floor, fixed where
  // the split put it (`fixed` is left empty when there is no floor).
  const auto part_instance = [&](std::size_t k, std::vector<std::int64_t>& fixed) {
    instance sub;
    sub.buffers.reserve(shapes[k].order.size() + shapes[k].floor.size());
    for (const std::size_t i : shapes[k].order) sub.buffers.push_back(inst.buffers[i]);
    fixed.clear();
    if (!shapes[k].floor.empty()) {
      fixed.assign(sub.buffers.size(), -1);
      sub.buffers.insert(sub.buffers.end(), shapes[k].floor.begin(), shapes[k].floor.end());
      fixed.insert(fixed.end(), shapes[k].floor_offsets.begin(), shapes[k].floor_offsets.end());
    }
    return sub;
  };
  // A part need not go below what keeps the whole at LOAD (or under a capacity asked
  // for without minimising): it stops minimising there.
  const std::int64_t target =
      opts.capacity && !opts.minimize_within_capacity ? *opts.capacity : out.load_bytes;
  std::vector<std::vector<std::int64_t>> shape_offsets(split.parts.size());
  std::vector<std::int64_t> shape_height(split.parts.size(), 0);
  const auto needs_work = [&](std::size_t k) {
    return shape_offsets[k].empty() || split.parts[k].base + shape_height[k] > target;
  };
  // The members whose time a search has: its part's, and its siblings' that take its
  // plan (only a first part has siblings).
  const auto searched_members = [&](std::size_t k) {
    std::size_t members = split.parts[k].members.size();
    for (std::size_t s = k + 1; s < split.parts.size(); ++s) {
      if (first_of[s] == k && !own_search[s] && needs_work(s))
        members += split.parts[s].members.size();
    }
    return members;
  };
  const auto is_searched = [&](std::size_t k) {
    return planned_as[k] == k && (first_of[k] == k || own_search[k]);
  };
  // Two rounds: every shape in half its share of the time, then the shapes still above
  // the target again in all the time left (a plan is kept only if it is lower).
  for (const double round_share : {0.5, 1.0}) {
    // The parts searched in this round, chosen at its start: a sibling that a carried
    // plan leaves higher is searched on its own from the next round on (its time in
    // this one went to the part it came from).
    std::vector<bool> searched_now(split.parts.size(), false);
    std::size_t round_members = 0;
    for (std::size_t k = 0; k < split.parts.size(); ++k) {
      searched_now[k] = is_searched(k) && needs_work(k);
      if (searched_now[k]) round_members += searched_members(k);
    }
    for (std::size_t k = 0; k < split.parts.size() && round_members > 0; ++k) {
      const detail::part& p = split.parts[k];
      const bool first_round = shape_offsets[k].empty();
      if (!searched_now[k]) continue;
      std::vector<std::int64_t> fixed;
      const instance sub = part_instance(k, fixed);
      options sub_options = opts;
      sub_options.capacity.reset();
      sub_options.minimize_within_capacity = false;
      const double left =
          std::max(0.0, std::chrono::duration<double>(deadline - clock::now()).count());
      const std::size_t members = searched_members(k);
      // Never past the whole's deadline, whatever the shares.
      sub_options.time_limit_seconds =
          std::min(left, round_share * left * static_cast<double>(members) /
                             static_cast<double>(round_members));
      round_members -= members;
      result part_result = solve_impl(sub, sub_options, target - p.base, cut_bands, climb,
                                      fixed.empty() ? nullptr : &fixed);
      part_result.best.offsets.resize(p.members.size());  // the floor's stay where they were
      out.nodes += part_result.nodes;
      if (first_round)
        greedy_height = std::max(greedy_height, p.base + part_result.greedy_height_bytes);
      if (first_round || part_result.height_bytes < shape_height[k]) {
        shape_offsets[k] = part_result.best.offsets;
        shape_height[k] = part_result.height_bytes;
      }
      for (std::size_t s = k + 1; s < split.parts.size(); ++s) {
        if (first_of[s] != k || own_search[s] || !needs_work(s)) continue;
        std::vector<std::int64_t> sibling_fixed;
        const instance sibling = part_instance(s, sibling_fixed);
        std::vector<std::int64_t> offsets;
        const std::int64_t h =
            detail::carry_plan(sub, shape_offsets[k], sibling, sibling_fixed, deadline, offsets);
        if (shape_offsets[s].empty() || h < shape_height[s]) {
          if (shape_offsets[s].empty())
            greedy_height = std::max(greedy_height, split.parts[s].base + h);
          shape_offsets[s] = std::move(offsets);
          shape_height[s] = h;
        }
        // Left higher than the part it came from: searched on its own from now on.
        if (split.parts[s].base + shape_height[s] > p.base + shape_height[k]) own_search[s] = true;
      }
    }
  }
  for (std::size_t k = 0; k < split.parts.size(); ++k) {
    const std::vector<std::int64_t>& offsets = shape_offsets[planned_as[k]];
    for (std::size_t j = 0; j < shapes[k].order.size(); ++j)
      out.best.offsets[shapes[k].order[j]] = split.parts[k].base + offsets[j];
  }
  if (const validation check = validate(inst, out.best); !check) {
    throw invariant_violation("[memkit::planner::solve] a plan by parts is invalid: " +
                              check.message);
  }
  out.height_bytes = height(inst, out.best);
  out.greedy_height_bytes = greedy_height;
  out.fits = !opts.capacity || out.height_bytes <= *opts.capacity;
  // Proven only at LOAD: a part proven optimal above its base says nothing of the
  // whole.
  out.optimal = out.height_bytes <= out.load_bytes;
  out.seconds = seconds_since(start);
  return out;
}

}  // namespace

result solve(const instance& inst, const options& opts) {
  return solve_impl(inst, opts, 0, true, false);
}

namespace {

// solve(), stopping once the height is at most `enough` (or LOAD, if higher); bands
// are cut (see detail::decompose) only when `cut_bands`. `climb`: the instance is a
// part of a loop cut into bands, whose whole stayed above LOAD (a generate loop):
// best fit then starts from size classes too, and a hill climb gets most of the time.
result solve_impl(const instance& inst, const options& opts, std::int64_t enough, bool cut_bands,
                  bool climb, const std::vector<std::int64_t>* fixed) {
  const clock::time_point start = clock::now();
  const clock::time_point deadline =
      start + std::chrono::duration_cast<clock::duration>(
                  std::chrono::duration<double>(std::max(0.0, opts.time_limit_seconds)));
  std::int64_t total = 0;
  for (const buffer& b : inst.buffers) {
    if (b.size <= 0 || b.size > kMaxTotalBytes - total) {
      throw planner_error("[memkit::planner::solve] buffer " + std::to_string(b.id) +
                          (b.size <= 0 ? " has no bytes" : ": the sizes sum past 2^62 bytes"));
    }
    total += b.size;
  }
  // The split, computed once: here for large instances (which may go part by part) and
  // for those that may be cut into bands, for the search otherwise.
  std::optional<detail::decomposition> split;
  const bool large = inst.buffers.size() > kLargeInstanceBuffers;
  if (fixed == nullptr && (large || (cut_bands && inst.buffers.size() > detail::kBandMinBuffers))) {
    split = detail::decompose(inst);
    const auto largest_part = [](const detail::decomposition& d) {
      std::size_t largest = 0;
      for (const detail::part& p : d.parts) largest = std::max(largest, p.members.size());
      return largest;
    };
    std::optional<detail::decomposition> banded;
    if (cut_bands && largest_part(*split) > detail::kBandMinBuffers) {
      banded = detail::decompose(inst, true);
      if (largest_part(*banded) >= largest_part(*split)) banded.reset();  // no band cut
    }
    if (banded) {
      // A band keeps the whole a few bytes above LOAD, while some large parts reach
      // LOAD whole (a loop that reaches LOAD in one step only): the whole is planned
      // without bands in a quarter of the time, and cut into bands in the rest unless
      // it reached the goal. The lower plan is kept.
      options whole_options = opts;
      whole_options.time_limit_seconds = opts.time_limit_seconds / 4;
      const clock::time_point whole_deadline = start + (deadline - start) / 4;
      result whole =
          large && split->parts.size() > 1
              ? solve_by_parts(inst, whole_options, *split, start, whole_deadline, false, false)
              : solve_impl(inst, whole_options, enough, false, false);
      const std::int64_t goal =
          opts.capacity && !opts.minimize_within_capacity ? *opts.capacity : enough;
      if (whole.height_bytes > std::max(goal, whole.load_bytes)) {
        // A band is cut once: the steps it frees are not cut again (a generate step
        // would fall apart into its tokens, each band adding to the step's height).
        result cut = solve_by_parts(inst, opts, *banded, start, deadline, false, true);
        cut.nodes += whole.nodes;
        if (cut.height_bytes < whole.height_bytes) whole = std::move(cut);
      }
      whole.seconds = seconds_since(start);
      return whole;
    }
    if (large && split->parts.size() > 1)
      return solve_by_parts(inst, opts, *split, start, deadline, cut_bands, climb);
    // One group that no band cuts either (a serving loop's caches cross every moment).
    if (large && split->parts.size() == 1 &&
        split->parts[0].members.size() > kRollingHorizonBuffers) {
      result out;
      out.load_bytes = load(inst);
      out.parts = 1;
      out.best = detail::rolling_horizon(inst, kRollingWindow, deadline);
      plan online = detail::online_best_fit(inst);
      if (height(inst, online) < height(inst, out.best)) out.best = std::move(online);
      out.greedy_height_bytes = height(inst, out.best);
      out.best = detail::improve_by_windows(inst, std::move(out.best), out.load_bytes, deadline);
      if (const validation check = validate(inst, out.best); !check) {
        throw invariant_violation("[memkit::planner::solve] a rolling-horizon plan is invalid: " +
                                  check.message);
      }
      out.height_bytes = height(inst, out.best);
      out.fits = !opts.capacity || out.height_bytes <= *opts.capacity;
      out.optimal = out.height_bytes <= out.load_bytes;
      out.seconds = seconds_since(start);
      return out;
    }
  }
  result out;
  out.load_bytes = load(inst);
  enough = std::max(enough, out.load_bytes);
  // Every pass below is bounded by the deadline, the first one too: the time limit
  // bounds the whole call.
  out.best = detail::greedy_in_order(inst, detail::size_order(inst), deadline, fixed);
  if (fixed == nullptr) {
    // Best fit may have stacked what it had no time for, and on a growing cache it
    // lands far above the online floor, which costs O(n log n) and never stacks.
    plan online = detail::online_best_fit(inst);
    if (height(inst, online) < height(inst, out.best)) out.best = std::move(online);
  }
  out.greedy_height_bytes = height(inst, out.best);
  out.height_bytes = out.greedy_height_bytes;
  if (const validation check = validate(inst, out.best); !check) {
    throw invariant_violation("[memkit::planner::solve] greedy plan is invalid: " + check.message);
  }

  // The result as it stands; `proven_floor`: no plan is lower than this.
  const auto finish = [&](std::int64_t proven_floor) {
    out.fits = !opts.capacity || out.height_bytes <= *opts.capacity;
    out.optimal = out.height_bytes <= proven_floor;
    out.seconds = seconds_since(start);
    return out;
  };
  if (clock::now() > deadline) return finish(out.load_bytes);

  // Remembers a plan if it is lower than the best so far, after checking it.
  const auto offer = [&](const plan& candidate) {
    const std::int64_t candidate_height = height(inst, candidate);
    if (candidate_height >= out.height_bytes) return;
    if (const validation check = validate(inst, candidate); !check) {
      throw invariant_violation("[memkit::planner::solve] search produced an invalid plan: " +
                                check.message);
    }
    out.best = candidate;
    out.height_bytes = candidate_height;
  };

  // Best fit again, taking the buffers live through the highest load first (far lower
  // than size order on long schedules), then repaired: each round moves the buffers
  // that end above the target (the capacity, or just below the best height so far)
  // halfway to the front of the order and runs best fit again. The few buffers that
  // found no gap get first pick next time; on long schedules this reaches LOAD in a
  // few rounds where the search cannot even start.
  //
  // Sweeps through time, backward and forward, are tried beside it and the repair
  // starts from whichever order gave the lowest plan: where the load climbs to a peak
  // at the end of each iteration (generation with a growing cache) a backward sweep
  // lands far lower than peak-first.
  {
    std::vector<std::size_t> order = detail::peak_first_order(inst);
    plan candidate = detail::greedy_in_order(inst, order, deadline, fixed);
    // Size classes then the latest death: only on the steps of a loop cut into bands.
    // Elsewhere it was measured to keep parts of 17k-23k buffers off the LOAD they
    // reached before (resnet50_sgd, convnext_tiny_adamw).
    const int kinds = climb ? 3 : 2;
    for (int kind = 0; kind < kinds; ++kind) {
      std::vector<std::size_t> sweep =
          kind < 2 ? detail::sweep_order(inst, kind == 0) : detail::size_class_sweep_order(inst);
      plan swept = detail::greedy_in_order(inst, sweep, deadline, fixed);
      if (height(inst, swept) < height(inst, candidate)) {
        order = std::move(sweep);
        candidate = std::move(swept);
      }
    }
    std::vector<std::size_t> late;
    const clock::time_point repair_until =
        start +
        std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(
            opts.time_limit_seconds *
            (inst.buffers.size() > kLargeInstanceBuffers ? kRepairShareLarge : kRepairShare)));
    offer(candidate);
    // The repair's best order and its plan, which the climb starts from (kept only for it).
    std::vector<std::size_t> best_order;
    plan best_candidate;
    if (climb) {
      best_order = order;
      best_candidate = candidate;
    }
    for (int stale = 0; stale < kRepairStaleRounds && clock::now() < repair_until; ++stale) {
      if (out.height_bytes <= enough) break;
      if (opts.capacity && out.height_bytes <= *opts.capacity) break;
      const std::int64_t target = opts.capacity && *opts.capacity < out.height_bytes
                                      ? *opts.capacity
                                      : out.height_bytes - 1;
      detail::move_late_forward(inst, candidate, target, order, late);
      candidate = detail::greedy_in_order(inst, order, deadline, fixed);
      const std::int64_t before = out.height_bytes;
      offer(candidate);
      if (out.height_bytes < before) {
        stale = 0;
        if (climb) {
          best_order = order;
          best_candidate = candidate;
        }
      }
    }
    // On a generate step the search does not close the gap to LOAD: three quarters of
    // the time left go to a hill climb from the repair's best order first, or from the
    // cache chains in fixed slots where that lands lower.
    if (climb && fixed == nullptr && inst.buffers.size() > kLargeInstanceBuffers &&
        out.height_bytes > enough && !(opts.capacity && out.height_bytes <= *opts.capacity)) {
      const std::int64_t goal = opts.capacity ? std::max(enough, *opts.capacity) : enough;
      std::vector<std::int64_t> slots =
          best_chain_slots(inst, goal, deadline, best_order, best_candidate);
      offer(best_candidate);
      const clock::time_point now = clock::now();
      if (now < deadline) {
        offer(detail::climb_order(inst, best_order, std::move(best_candidate), goal,
                                  now + (deadline - now) * 3 / 4,
                                  slots.empty() ? nullptr : &slots));
      }
    }
  }

  // On a large instance the repair leaves a few buffers at the top that no order of
  // best fit moves, and the search rarely gets far: windows of time around them are
  // planned again, in half the time left (improve_by_windows).
  if (inst.buffers.size() > kLargeInstanceBuffers && out.height_bytes > enough &&
      !(opts.capacity && out.height_bytes <= *opts.capacity)) {
    const clock::time_point now = clock::now();
    if (now < deadline) {
      const std::int64_t goal = opts.capacity ? std::max(enough, *opts.capacity) : enough;
      offer(detail::improve_by_windows(inst, out.best, goal, now + (deadline - now) / 2, fixed));
    }
  }

  // The search's setup costs time and memory in proportion to the instance: none
  // once the time is up.
  if (clock::now() > deadline) return finish(out.load_bytes);
  // Over fixed buffers (a part's floor), the rest is searched as one part above them.
  const auto over_fixed = [&] {
    detail::decomposition d;
    d.fixed_offsets = *fixed;
    d.parts.emplace_back();
    for (std::size_t i = 0; i < inst.buffers.size(); ++i)
      ((*fixed)[i] < 0 ? d.parts[0].members : d.parts[0].resting).push_back(i);
    return d;
  };
  planner_state state(inst, fixed   ? over_fixed()
                            : split ? std::move(*split)
                                    : detail::decompose(inst));
  out.parts = state.part_count();

  std::int64_t proven_floor = out.load_bytes;  // no plan is lower than this
  std::int64_t search_floor = enough;          // the lowest capacity still worth a try
  bool done = out.height_bytes <= enough;

  if (opts.capacity && !done) {
    if (out.height_bytes > *opts.capacity) {
      plan candidate;
      const search_status status = state.attempt(*opts.capacity, deadline, candidate);
      if (status == search_status::found) offer(candidate);
      if (status == search_status::infeasible) proven_floor = *opts.capacity + 1;
    }
    done = !opts.minimize_within_capacity || out.height_bytes > *opts.capacity;
  }

  // Minimise: LOAD first (often reachable, and then quickly: it gets an eighth of the
  // time), then bisect between the lowest capacity not yet ruled out and the best
  // height found. Each attempt gets a share of the time left, so a capacity the
  // search cannot settle does not take all of it.
  bool first_attempt = true;
  while (!done) {
    search_floor = std::max(search_floor, proven_floor);
    if (search_floor >= out.height_bytes) break;
    const double left = std::chrono::duration<double>(deadline - clock::now()).count();
    if (left <= 0) break;
    const std::int64_t target =
        first_attempt ? search_floor : search_floor + (out.height_bytes - 1 - search_floor) / 2;
    const double share = first_attempt ? left / 8 : left / 3;
    first_attempt = false;
    plan candidate;
    const search_status status = state.attempt(
        target,
        clock::now() +
            std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(share)),
        candidate);
    if (status == search_status::found) {
      offer(candidate);
    } else if (status == search_status::infeasible) {
      proven_floor = target + 1;
    } else {
      search_floor = target + 1;  // not settled in time: look higher, nothing proven
    }
  }
  out.nodes = state.nodes();
  return finish(proven_floor);
}

}  // namespace
}  // namespace memkit::planner

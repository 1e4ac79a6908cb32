// LOAD, height, the validator and the greedy floor (include/memkit/planner.hpp).
#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "memkit/planner.hpp"
#include "planner/search.hpp"

namespace memkit::planner {
namespace {

// A lifetime boundary; at equal times ends sort before starts, because lifetimes are
// half-open: a buffer dying at t and one born at t never meet.
struct event {
  std::int64_t time;
  bool is_start;
  std::size_t index;
  bool operator<(const event& other) const {
    if (time != other.time) return time < other.time;
    if (is_start != other.is_start) return !is_start;
    return index < other.index;
  }
};

std::vector<event> sorted_events(const instance& inst) {
  std::vector<event> events;
  events.reserve(2 * inst.buffers.size());
  for (std::size_t i = 0; i < inst.buffers.size(); ++i) {
    events.push_back({inst.buffers[i].lower, true, i});
    events.push_back({inst.buffers[i].upper, false, i});
  }
  std::sort(events.begin(), events.end());
  return events;
}

std::string describe(const buffer& b, std::int64_t offset) {
  return "buffer " + std::to_string(b.id) + " (live [" + std::to_string(b.lower) + ", " +
         std::to_string(b.upper) + "), bytes [" + std::to_string(offset) + ", " +
         std::to_string(offset + b.size) + "))";
}

validation failure(std::string message) {
  return validation{false, "[memkit::planner::validate] " + std::move(message)};
}

}  // namespace

std::int64_t load(const instance& inst) {
  std::int64_t live = 0;
  std::int64_t peak = 0;
  for (const event& e : sorted_events(inst)) {
    live += e.is_start ? inst.buffers[e.index].size : -inst.buffers[e.index].size;
    peak = std::max(peak, live);
  }
  return peak;
}

std::int64_t height(const instance& inst, const plan& p) {
  std::int64_t top = 0;
  const std::size_t n = std::min(inst.buffers.size(), p.offsets.size());
  for (std::size_t i = 0; i < n; ++i) top = std::max(top, p.offsets[i] + inst.buffers[i].size);
  return top;
}

validation validate(const instance& inst, const plan& p, std::optional<std::int64_t> capacity) {
  const std::vector<buffer>& buffers = inst.buffers;
  if (p.offsets.size() != buffers.size()) {
    return failure("the plan has " + std::to_string(p.offsets.size()) + " offsets for " +
                   std::to_string(buffers.size()) + " buffers");
  }
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const buffer& b = buffers[i];
    if (b.size <= 0 || b.upper <= b.lower) {
      return failure("buffer " + std::to_string(b.id) + " is malformed (size " +
                     std::to_string(b.size) + ", live [" + std::to_string(b.lower) + ", " +
                     std::to_string(b.upper) + "))");
    }
    if (p.offsets[i] < 0) return failure(describe(b, p.offsets[i]) + " has a negative offset");
    if (p.offsets[i] > std::numeric_limits<std::int64_t>::max() - b.size) {
      return failure(describe(b, p.offsets[i]) + " ends beyond the address range");
    }
    if (capacity && p.offsets[i] + b.size > *capacity) {
      return failure(describe(b, p.offsets[i]) + " ends at " +
                     std::to_string(p.offsets[i] + b.size) + ", above the capacity " +
                     std::to_string(*capacity));
    }
  }
  // Sweep time; the buffers live at the current moment are kept by offset, pairwise
  // disjoint, so a newcomer only needs to be checked against its two neighbours.
  std::map<std::int64_t, std::size_t> live_by_offset;
  for (const event& e : sorted_events(inst)) {
    const std::int64_t offset = p.offsets[e.index];
    if (!e.is_start) {
      live_by_offset.erase(offset);
      continue;
    }
    const buffer& b = buffers[e.index];
    auto next = live_by_offset.lower_bound(offset);
    std::size_t clash = buffers.size();
    if (next != live_by_offset.end() && next->first < offset + b.size) clash = next->second;
    if (clash == buffers.size() && next != live_by_offset.begin()) {
      const auto previous = std::prev(next);
      if (previous->first + buffers[previous->second].size > offset) clash = previous->second;
    }
    if (clash != buffers.size()) {
      const buffer& other = buffers[clash];
      const std::int64_t other_offset = p.offsets[clash];
      return failure(describe(other, other_offset) + " and " + describe(b, offset) +
                     " overlap: both are live at time " + std::to_string(e.time) +
                     " and share bytes [" + std::to_string(std::max(offset, other_offset)) + ", " +
                     std::to_string(std::min(offset + b.size, other_offset + other.size)) + ")");
    }
    live_by_offset.emplace(offset, e.index);
  }
  return validation{};
}

plan greedy_best_fit(const instance& inst) {
  return detail::greedy_in_order(inst, detail::size_order(inst));
}

namespace detail {

std::vector<std::size_t> size_order(const instance& inst) {
  const std::vector<buffer>& buffers = inst.buffers;
  std::vector<std::size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  // Largest first; among equals the longer-lived first, then input order.
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (buffers[a].size != buffers[b].size) return buffers[a].size > buffers[b].size;
    const std::int64_t span_a = buffers[a].upper - buffers[a].lower;
    const std::int64_t span_b = buffers[b].upper - buffers[b].lower;
    if (span_a != span_b) return span_a > span_b;
    return a < b;
  });
  return order;
}

namespace {

// Best fit costs up to the square of the buffers: past the deadline, checked every
// kDeadlineStride buffers, the rest are stacked above all placed so far (a valid
// plan in linear time, only higher).
constexpr std::size_t kDeadlineStride = 256;
bool stack_rest_if_late(const instance& inst, const std::vector<std::size_t>& order, std::size_t k,
                        clock::time_point deadline, std::int64_t top, plan& result,
                        const std::vector<std::int64_t>* fixed) {
  if (k % kDeadlineStride != 0 || clock::now() <= deadline) return false;
  for (; k < order.size(); ++k) {
    if (fixed && (*fixed)[order[k]] >= 0) continue;
    result.offsets[order[k]] = top;
    top += inst.buffers[order[k]].size;
  }
  return true;
}

// The blocks must look at this many times fewer pairs than scanning all to be worth
// their sorting.
constexpr double kBlockAdvantage = 4.0;
// A buffer spanning at least this many blocks goes to the list of long buffers.
constexpr std::size_t kLongBlocks = 32;

// Best fit scanning every placed buffer, kept by offset: the cheapest when lifetimes
// are long, since then most placed buffers are live at the same time anyway.
plan greedy_scanning_all(const instance& inst, const std::vector<std::size_t>& order,
                         clock::time_point deadline, const std::vector<std::int64_t>* fixed) {
  const std::vector<buffer>& buffers = inst.buffers;
  plan result;
  result.offsets.assign(buffers.size(), 0);
  std::vector<std::size_t> placed_by_offset;  // placed buffers, by offset
  placed_by_offset.reserve(buffers.size());
  std::int64_t top = 0;  // of every buffer placed
  if (fixed) {
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      if ((*fixed)[i] < 0) continue;
      result.offsets[i] = (*fixed)[i];
      top = std::max(top, (*fixed)[i] + buffers[i].size);
      placed_by_offset.push_back(i);
    }
    std::sort(placed_by_offset.begin(), placed_by_offset.end(),
              [&](std::size_t x, std::size_t y) { return result.offsets[x] < result.offsets[y]; });
  }
  for (std::size_t k = 0; k < order.size(); ++k) {
    if (stack_rest_if_late(inst, order, k, deadline, top, result, fixed)) break;
    const std::size_t i = order[k];
    if (fixed && (*fixed)[i] >= 0) continue;
    const buffer& b = buffers[i];
    std::int64_t reach = 0;  // top of the time-overlapping buffers seen so far
    std::int64_t best_offset = -1;
    std::int64_t best_gap = std::numeric_limits<std::int64_t>::max();
    for (const std::size_t j : placed_by_offset) {
      const buffer& other = buffers[j];
      if (other.lower >= b.upper || b.lower >= other.upper) continue;
      const std::int64_t gap = result.offsets[j] - reach;
      if (gap >= b.size && gap < best_gap) {
        best_gap = gap;
        best_offset = reach;
      }
      reach = std::max(reach, result.offsets[j] + other.size);
    }
    const std::int64_t offset = best_offset >= 0 ? best_offset : reach;
    result.offsets[i] = offset;
    top = std::max(top, offset + b.size);
    const auto position = std::upper_bound(
        placed_by_offset.begin(), placed_by_offset.end(), offset,
        [&](std::int64_t value, std::size_t j) { return value < result.offsets[j]; });
    placed_by_offset.insert(position, i);
  }
  return result;
}

}  // namespace

void move_late_forward(const instance& inst, const plan& p, std::int64_t target,
                       std::vector<std::size_t>& order, std::vector<std::size_t>& late) {
  late.clear();
  for (std::size_t k = 0; k < order.size(); ++k) {
    const std::size_t i = order[k];
    if (p.offsets[i] + inst.buffers[i].size > target) late.push_back(k);
  }
  for (auto it = late.rbegin(); it != late.rend(); ++it) {
    const std::size_t i = order[*it];
    order.erase(order.begin() + static_cast<std::ptrdiff_t>(*it));
    order.insert(order.begin() + static_cast<std::ptrdiff_t>(*it / 2), i);
  }
}

std::int64_t carry_plan(const instance& from, const std::vector<std::int64_t>& from_offsets,
                        const instance& to, std::vector<std::int64_t> fixed,
                        clock::time_point deadline, std::vector<std::int64_t>& offsets) {
  const std::size_t members = from_offsets.size();
  if (fixed.empty()) fixed.assign(to.buffers.size(), -1);
  const auto meets = [&](const buffer& x, std::int64_t x_offset, const buffer& y,
                         std::int64_t y_offset) {
    return x.lower < y.upper && y.lower < x.upper && x_offset < y_offset + y.size &&
           y_offset < x_offset + x.size;
  };
  std::vector<std::size_t> order;  // the members placed again
  for (std::size_t j = 0; j < members; ++j) {
    bool keep = to.buffers[j].size <= from.buffers[j].size;
    for (std::size_t f = members; keep && f < to.buffers.size(); ++f)
      keep = !meets(to.buffers[j], from_offsets[j], to.buffers[f], fixed[f]);
    if (keep) {
      fixed[j] = from_offsets[j];
    } else {
      order.push_back(j);
    }
  }
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return to.buffers[a].size > to.buffers[b].size;
  });
  plan p = greedy_in_order(to, order, deadline, &fixed);
  if (const validation check = validate(to, p); !check) {
    throw invariant_violation("[memkit::planner::carry_plan] the plan carried over is invalid: " +
                              check.message);
  }
  const std::int64_t h = height(to, p);
  p.offsets.resize(members);
  offsets = std::move(p.offsets);
  return h;
}

namespace {
constexpr int kWindowStaleRounds = 10;  // repair rounds without a lower window plan
// improve_by_windows: a window holds about kWindowBuffers << k buffers born in it besides
// the top buffer's own lifetime, k drawn from 0 .. kWindowScales - 1 (fixed seed).
constexpr std::size_t kWindowBuffers = 256;
constexpr int kWindowScales = 4;
constexpr std::uint64_t kWindowSeed = 1;

// One window's plan: best fit in size, peak-first and both sweep orders, the lowest
// repaired (as solve() repairs the whole: the buffers ending above the best height so
// far move halfway to the front of the order) while it stays above `goal`.
plan plan_window(const instance& window, const std::vector<std::int64_t>& fixed, std::int64_t goal,
                 clock::time_point deadline) {
  std::vector<std::vector<std::size_t>> orders{size_order(window), peak_first_order(window),
                                               sweep_order(window, true),
                                               sweep_order(window, false)};
  plan best;
  std::int64_t best_height = -1;
  std::vector<std::size_t> order;
  for (std::vector<std::size_t>& candidate : orders) {
    plan p = greedy_in_order(window, candidate, deadline, &fixed);
    const std::int64_t h = height(window, p);
    if (best_height < 0 || h < best_height) {
      best_height = h;
      best = std::move(p);
      order = std::move(candidate);
    }
  }
  std::vector<std::size_t> late;
  plan current = best;  // the plan of `order`
  for (int stale = 0; stale < kWindowStaleRounds && best_height > goal && clock::now() < deadline;
       ++stale) {
    move_late_forward(window, current, std::max(goal, best_height - 1), order, late);
    current = greedy_in_order(window, order, deadline, &fixed);
    if (const std::int64_t h = height(window, current); h < best_height) {
      best_height = h;
      best = current;
      stale = -1;
    }
  }
  return best;
}
}  // namespace

plan rolling_horizon(const instance& inst, std::size_t window, clock::time_point deadline) {
  const std::size_t n = inst.buffers.size();
  std::vector<std::size_t> by_birth(n);
  std::iota(by_birth.begin(), by_birth.end(), std::size_t{0});
  std::stable_sort(by_birth.begin(), by_birth.end(), [&](std::size_t a, std::size_t b) {
    return inst.buffers[a].lower < inst.buffers[b].lower;
  });
  const std::int64_t goal = load(inst);
  plan result;
  result.offsets.assign(n, 0);
  std::vector<std::size_t> placed_alive;  // placed in earlier windows, perhaps still alive
  const std::size_t step = std::max<std::size_t>(window, 1);
  for (std::size_t first = 0; first < n; first += step) {
    const std::size_t end = std::min(n, first + step);
    const std::int64_t from = inst.buffers[by_birth[first]].lower;
    std::erase_if(placed_alive, [&](std::size_t i) { return inst.buffers[i].upper <= from; });
    instance part;
    std::vector<std::size_t> whole_index;
    std::vector<std::int64_t> fixed;
    for (const std::size_t i : placed_alive) {
      part.buffers.push_back(inst.buffers[i]);
      whole_index.push_back(i);
      fixed.push_back(result.offsets[i]);
    }
    for (std::size_t k = first; k < end; ++k) {
      part.buffers.push_back(inst.buffers[by_birth[k]]);
      whole_index.push_back(by_birth[k]);
      fixed.push_back(-1);
    }
    const plan p = plan_window(part, fixed, goal, deadline);
    for (std::size_t k = 0; k < part.buffers.size(); ++k) {
      if (fixed[k] >= 0) continue;
      result.offsets[whole_index[k]] = p.offsets[k];
      placed_alive.push_back(whole_index[k]);
    }
  }
  return result;
}

std::pair<std::int64_t, std::int64_t> calculate_time_span(const instance& inst) {
  std::int64_t first = std::numeric_limits<std::int64_t>::max();
  std::int64_t last = std::numeric_limits<std::int64_t>::min();
  for (const buffer& b : inst.buffers) {
    first = std::min(first, b.lower);
    last = std::max(last, b.upper);
  }
  return {first, last};
}

plan improve_by_windows(const instance& inst, plan p, std::int64_t goal, clock::time_point deadline,
                        const std::vector<std::int64_t>* fixed) {
  const std::size_t n = inst.buffers.size();
  if (n == 0) return p;
  const auto [first, last] = calculate_time_span(inst);
  // Buffers born per unit of time, to turn a window's buffer count into its length.
  const double per_moment = static_cast<double>(n) / static_cast<double>(last - first);
  std::mt19937_64 rng(kWindowSeed);
  std::int64_t h = height(inst, p);
  std::vector<std::size_t> tops;
  bool fixed_at_top = false;  // then no window can lower the plan
  const auto find_tops = [&](const plan& q, std::int64_t top) {
    tops.clear();
    for (std::size_t i = 0; i < n; ++i) {
      if (q.offsets[i] + inst.buffers[i].size != top) continue;
      tops.push_back(i);
      fixed_at_top = fixed_at_top || (fixed && (*fixed)[i] >= 0);
    }
  };
  find_tops(p, h);
  instance window;
  std::vector<std::size_t> whole_index;
  std::vector<std::int64_t> window_fixed;
  plan candidate;
  std::vector<std::size_t> candidate_tops;
  while (h > goal && !fixed_at_top && clock::now() < deadline) {
    const buffer& top = inst.buffers[tops[rng() % tops.size()]];
    const std::size_t buffers = kWindowBuffers << (rng() % kWindowScales);
    // Within [first, last), so that no sum leaves 64 bits on any schedule.
    const double wanted = static_cast<double>(buffers) / (2 * per_moment);
    const std::int64_t reach = wanted >= static_cast<double>(last - first)
                                   ? last - first
                                   : static_cast<std::int64_t>(wanted);
    const std::int64_t from = top.lower - std::min(reach, top.lower - first);
    const std::int64_t to = top.upper + std::min(reach, last - top.upper);
    // The buffers that live inside the window move; those that cross its ends (or were
    // fixed by the caller) stay where they are.
    window.buffers.clear();
    whole_index.clear();
    window_fixed.clear();
    for (std::size_t i = 0; i < n; ++i) {
      const buffer& b = inst.buffers[i];
      if (b.upper <= from || b.lower >= to) continue;
      const bool moves = b.lower >= from && b.upper <= to && (!fixed || (*fixed)[i] < 0);
      window.buffers.push_back(b);
      whole_index.push_back(i);
      window_fixed.push_back(moves ? -1 : p.offsets[i]);
    }
    const plan q = plan_window(window, window_fixed, goal, deadline);
    candidate = p;
    for (std::size_t k = 0; k < window.buffers.size(); ++k)
      candidate.offsets[whole_index[k]] = q.offsets[k];
    const std::int64_t candidate_height = height(inst, candidate);
    if (candidate_height > h) continue;
    std::swap(tops, candidate_tops);
    find_tops(candidate, candidate_height);  // a fixed buffer at h is at the top already
    // Kept when lower, or as high with fewer buffers at the top: never back to a plan
    // seen before.
    if (candidate_height < h || tops.size() < candidate_tops.size()) {
      std::swap(p, candidate);
      h = candidate_height;
    } else {
      std::swap(tops, candidate_tops);
    }
  }
  return p;
}

plan online_best_fit(const instance& inst) {
  plan result;
  result.offsets.assign(inst.buffers.size(), 0);
  std::map<std::int64_t, std::int64_t> by_offset;           // free ranges below top
  std::set<std::pair<std::int64_t, std::int64_t>> by_size;  // (size, offset)
  std::int64_t top = 0;
  const auto add_free = [&](std::int64_t offset, std::int64_t size) {
    auto next = by_offset.lower_bound(offset);
    if (next != by_offset.end() && next->first == offset + size) {
      size += next->second;
      by_size.erase({next->second, next->first});
      next = by_offset.erase(next);
    }
    if (next != by_offset.begin()) {
      const auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        offset = prev->first;
        size += prev->second;
        by_size.erase({prev->second, prev->first});
        by_offset.erase(prev);
      }
    }
    by_offset.emplace(offset, size);
    by_size.emplace(size, offset);
  };
  for (const event& e : sorted_events(inst)) {
    const std::int64_t size = inst.buffers[e.index].size;
    if (!e.is_start) {
      add_free(result.offsets[e.index], size);
      continue;
    }
    const auto fit = by_size.lower_bound({size, std::numeric_limits<std::int64_t>::min()});
    std::int64_t offset;
    if (fit != by_size.end()) {
      offset = fit->second;
      const std::int64_t rest = fit->first - size;
      by_offset.erase(offset);
      by_size.erase(fit);
      if (rest > 0) add_free(offset + size, rest);
    } else if (!by_offset.empty() &&
               std::prev(by_offset.end())->first + std::prev(by_offset.end())->second == top) {
      // The highest free range grows into the new top.
      const auto last = std::prev(by_offset.end());
      offset = last->first;
      by_size.erase({last->second, last->first});
      by_offset.erase(last);
      top = offset + size;
    } else {
      offset = top;
      top += size;
    }
    result.offsets[e.index] = offset;
  }
  return result;
}

plan greedy_in_order(const instance& inst, const std::vector<std::size_t>& order,
                     clock::time_point deadline, const std::vector<std::int64_t>* fixed) {
  // Each buffer needs the placed buffers live at the same time as it, by offset. Time
  // is cut into blocks of sections and every placed buffer is listed in the blocks it
  // touches, so a buffer looks only at those near it in time: on long schedules that
  // is a small share of all placed buffers.
  const std::vector<buffer>& buffers = inst.buffers;
  const std::size_t n = buffers.size();
  std::vector<std::int64_t> points;
  points.reserve(2 * n);
  for (const buffer& b : buffers) points.push_back(b.lower);
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  constexpr std::size_t kBlockSections = 16;
  const auto block_of = [&](std::int64_t time) {  // block of the last start at or before time
    const auto at = std::upper_bound(points.begin(), points.end(), time) - points.begin();
    return static_cast<std::size_t>(at > 0 ? at - 1 : 0) / kBlockSections;
  };
  // Buffers spanning many blocks are kept in one list every buffer looks through
  // instead. A buffer listed in a block is looked at by every later buffer listed
  // there, so the blocks cost about the sum over blocks of their listings squared
  // (halved), the long list n times its length; scanning all costs n^2 / 2 (and keeps
  // the placed buffers sorted, which the blocks do not).
  const std::size_t blocks = points.size() / kBlockSections + 1;
  const auto is_long = [&](const buffer& b) {
    return block_of(b.upper - 1) - block_of(b.lower) >= kLongBlocks;
  };
  std::vector<double> listed(blocks, 0.0);
  double long_count = 0;
  for (const buffer& b : buffers) {
    if (is_long(b)) {
      long_count += 1.0;
      continue;
    }
    for (std::size_t block = block_of(b.lower); block <= block_of(b.upper - 1); ++block) {
      listed[block] += 1.0;
    }
  }
  double block_cost = 2.0 * static_cast<double>(n) * long_count;
  for (const double count : listed) block_cost += count * count;
  if (block_cost > static_cast<double>(n) * static_cast<double>(n) / kBlockAdvantage) {
    return greedy_scanning_all(inst, order, deadline, fixed);
  }
  std::vector<std::vector<std::uint32_t>> in_block(blocks);
  std::vector<std::uint32_t> long_placed;
  std::vector<std::size_t> stamp(n, 0);
  std::vector<std::uint32_t> near;
  plan result;
  result.offsets.assign(n, 0);
  std::size_t round = 0;
  std::int64_t top = 0;  // of every buffer placed
  const auto list_placed = [&](std::size_t i, std::size_t first_block, std::size_t last_block) {
    if (last_block - first_block >= kLongBlocks) {
      long_placed.push_back(static_cast<std::uint32_t>(i));
    } else {
      for (std::size_t block = first_block; block <= last_block; ++block) {
        in_block[block].push_back(static_cast<std::uint32_t>(i));
      }
    }
  };
  if (fixed) {
    for (std::size_t i = 0; i < n; ++i) {
      if ((*fixed)[i] < 0) continue;
      result.offsets[i] = (*fixed)[i];
      top = std::max(top, (*fixed)[i] + buffers[i].size);
      list_placed(i, block_of(buffers[i].lower), block_of(buffers[i].upper - 1));
    }
  }
  for (std::size_t k = 0; k < order.size(); ++k) {
    if (stack_rest_if_late(inst, order, k, deadline, top, result, fixed)) break;
    const std::size_t i = order[k];
    if (fixed && (*fixed)[i] >= 0) continue;
    const buffer& b = buffers[i];
    const std::size_t first_block = block_of(b.lower);
    const std::size_t last_block = block_of(b.upper - 1);
    ++round;
    near.clear();
    for (std::size_t block = first_block; block <= last_block; ++block) {
      for (const std::uint32_t j : in_block[block]) {
        if (stamp[j] == round) continue;
        stamp[j] = round;
        const buffer& other = buffers[j];
        if (other.lower < b.upper && b.lower < other.upper) near.push_back(j);
      }
    }
    for (const std::uint32_t j : long_placed) {
      const buffer& other = buffers[j];
      if (other.lower < b.upper && b.lower < other.upper) near.push_back(j);
    }
    std::sort(near.begin(), near.end(), [&](std::uint32_t x, std::uint32_t y) {
      return result.offsets[x] < result.offsets[y];
    });
    std::int64_t reach = 0;  // top of the time-overlapping buffers seen so far
    std::int64_t best_offset = -1;
    std::int64_t best_gap = std::numeric_limits<std::int64_t>::max();
    for (const std::uint32_t j : near) {
      const std::int64_t gap = result.offsets[j] - reach;
      if (gap >= b.size && gap < best_gap) {
        best_gap = gap;
        best_offset = reach;
      }
      reach = std::max(reach, result.offsets[j] + buffers[j].size);
    }
    result.offsets[i] = best_offset >= 0 ? best_offset : reach;
    top = std::max(top, result.offsets[i] + b.size);
    list_placed(i, first_block, last_block);
  }
  return result;
}

sections::sections(const instance& inst) {
  points.reserve(2 * inst.buffers.size());
  for (const buffer& b : inst.buffers) {
    points.push_back(b.lower);
    points.push_back(b.upper);
  }
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
}

std::vector<std::size_t> peak_first_order(const instance& inst) {
  // The largest load over each buffer's lifetime, by a sweep over its sections.
  const std::vector<buffer>& buffers = inst.buffers;
  const sections time(inst);
  const std::vector<std::int64_t>& points = time.points;
  std::vector<std::int64_t> live(points.size() + 1, 0);
  for (const buffer& b : buffers) {
    live[time.of(b.lower)] += b.size;
    live[time.of(b.upper)] -= b.size;
  }
  for (std::size_t s = 1; s < live.size(); ++s) live[s] += live[s - 1];
  // Range maxima by a sparse table: level k holds the maximum of 2^k sections.
  std::vector<std::vector<std::int64_t>> table{live};
  for (std::size_t width = 1; 2 * width <= live.size(); width *= 2) {
    const std::vector<std::int64_t>& below = table.back();
    std::vector<std::int64_t> level(live.size() - 2 * width + 1);
    for (std::size_t s = 0; s < level.size(); ++s) level[s] = std::max(below[s], below[s + width]);
    table.push_back(std::move(level));
  }
  std::vector<std::int64_t> peak(buffers.size(), 0);
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const std::size_t first = time.of(buffers[i].lower);
    const std::size_t end = time.of(buffers[i].upper);
    std::size_t k = 0;
    while ((std::size_t{2} << k) <= end - first) ++k;
    peak[i] = std::max(table[k][first], table[k][end - (std::size_t{1} << k)]);
  }
  std::vector<std::size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (peak[a] != peak[b]) return peak[a] > peak[b];
    return buffers[a].size > buffers[b].size;
  });
  return order;
}

std::vector<std::size_t> sweep_order(const instance& inst, bool backward) {
  const std::vector<buffer>& buffers = inst.buffers;
  std::vector<std::size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return backward ? buffers[a].upper > buffers[b].upper : buffers[a].lower < buffers[b].lower;
  });
  return order;
}

std::vector<std::size_t> size_class_sweep_order(const instance& inst) {
  const std::vector<buffer>& buffers = inst.buffers;
  std::vector<int> size_class(buffers.size());
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    size_class[i] = static_cast<int>(std::bit_width(static_cast<std::uint64_t>(buffers[i].size)));
  }
  std::vector<std::size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (size_class[a] != size_class[b]) return size_class[a] > size_class[b];
    return buffers[a].upper > buffers[b].upper;
  });
  return order;
}

plan climb_order(const instance& inst, std::vector<std::size_t>& order, plan start,
                 std::int64_t goal, clock::time_point until, const std::vector<std::int64_t>* fixed,
                 std::uint64_t max_rounds) {
  plan best = std::move(start);
  std::int64_t best_height = height(inst, best);
  std::vector<std::size_t> trial;
  std::vector<std::size_t> late;
  std::uint64_t random = 0x9e3779b97f4a7c15ULL;
  for (std::uint64_t round = 0; round < max_rounds && best_height > goal && clock::now() < until;
       ++round) {
    trial = order;
    late.clear();
    for (std::size_t k = 0; k < trial.size(); ++k) {
      const std::size_t i = trial[k];
      if (best.offsets[i] + inst.buffers[i].size == best_height) late.push_back(k);
    }
    // From the back, so that the earlier positions stay put.
    for (auto it = late.rbegin(); it != late.rend(); ++it) {
      const std::size_t i = trial[*it];
      random = mix64(random);
      trial.erase(trial.begin() + static_cast<std::ptrdiff_t>(*it));
      trial.insert(trial.begin() + static_cast<std::ptrdiff_t>(random % (*it + 1)), i);
    }
    plan candidate = greedy_in_order(inst, trial, until, fixed);
    const std::int64_t candidate_height = height(inst, candidate);
    if (candidate_height > best_height) continue;
    order.swap(trial);
    best = std::move(candidate);
    best_height = candidate_height;
  }
  return best;
}

}  // namespace detail
}  // namespace memkit::planner

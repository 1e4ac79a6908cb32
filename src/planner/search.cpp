// Splitting instances into parts and the depth-first search over canonical plans.
//
// Canonical plans. Push every buffer of a plan down until it rests on a buffer live at
// the same time as it, or on 0; the height does not grow. In the pushed-down plan, list
// the buffers by offset: each one's offset is then the largest top of the buffers before
// it in the list that share a moment with it. So the search only has to choose an order:
// it places buffers in non-decreasing offset, each at `offset_floor` (the highest floor
// over its sections), and only a buffer whose offset_floor equals the current level may
// be placed; when none is left, the level rises to the lowest offset_floor above it.
//
// Branching. At a level, the search picks the section with the least slack among those
// whose floor is at or below the level and that still have bytes to place, and branches
// on which candidate covers that section at this level, or on none (then the section's
// floor is raised by the size granule and the candidates that cover it are banned for
// the rest of the level). The branches are disjoint, so no plan is visited twice, and
// together they cover every canonical plan, so an exhausted search proves infeasibility.
//
// Pruning. A section whose floor (or the level, if higher) plus the bytes still to
// place there exceeds the capacity cannot be completed.
#include "planner/search.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <set>
#include <utility>

namespace memkit::planner::detail {
namespace {

constexpr std::size_t kFailedStateSlots = std::size_t{1} << 20;
// Pairs of buffers live at the same time that a part may have to be searched: the
// search keeps them as adjacency lists (8 bytes a pair), and a part denser than
// this is left to the greedy passes (bounded memory and setup time).
constexpr std::uint64_t kMaxOverlapPairs = std::uint64_t{1} << 26;
constexpr std::uint64_t kRestartNodes = 4096;
constexpr std::size_t kElevatedBoundMaxBuffers = 4000;
constexpr int kMaxSplitDepth = 64;
// Cuts are sought where at most this fraction of the group's LOAD crosses, and a band
// is kept only when it raises the group above its LOAD by at most 1/kBandCostFraction:
// a group that best fit or the search could bring to LOAD whole (a loop whose steps
// reach LOAD only now and then) is better left whole than kept off LOAD by a band.
constexpr std::int64_t kBandLoadFraction = 4096;
constexpr std::int64_t kBandCostFraction = std::int64_t{1} << 20;
// A floor cut (calculate_floor_cut) is sought where at most this fraction of the
// group's LOAD crosses: a buffer a step hands on, not a step's working set.
constexpr std::int64_t kFloorCutLoadFraction = 256;

// The Luby sequence 1 1 2 1 1 2 4 1 1 2 1 1 2 4 8 ..., for k >= 1.
std::uint64_t luby(std::uint64_t k) {
  while (true) {
    std::uint64_t power = 1;
    while (power * 2 - 1 < k) power *= 2;  // smallest 2^j - 1 >= k
    if (power * 2 - 1 == k) return power;
    k -= power - 1;
  }
}

// Range add and range maximum over a fixed array, in O(log n) each (a segment tree with
// pending additions).
class max_tree {
 public:
  explicit max_tree(const std::vector<std::int64_t>& values) : n_(values.size()) {
    size_ = 1;
    while (size_ < n_) size_ *= 2;
    max_.assign(2 * size_, std::numeric_limits<std::int64_t>::min());
    add_.assign(2 * size_, 0);
    for (std::size_t i = 0; i < n_; ++i) max_[size_ + i] = values[i];
    for (std::size_t i = size_ - 1; i >= 1; --i) max_[i] = std::max(max_[2 * i], max_[2 * i + 1]);
  }
  // Adds v to positions [from, to).
  void add(std::size_t from, std::size_t to, std::int64_t v) { add(1, 0, size_, from, to, v); }
  // The largest value in [from, to); the lowest int64 when empty.
  std::int64_t get_max(std::size_t from, std::size_t to) const {
    return get_max(1, 0, size_, from, to);
  }

 private:
  void add(std::size_t node, std::size_t lo, std::size_t hi, std::size_t from, std::size_t to,
           std::int64_t v) {
    if (to <= lo || hi <= from) return;
    if (from <= lo && hi <= to) {
      max_[node] += v;
      add_[node] += v;
      return;
    }
    const std::size_t mid = (lo + hi) / 2;
    add(2 * node, lo, mid, from, to, v);
    add(2 * node + 1, mid, hi, from, to, v);
    max_[node] = std::max(max_[2 * node], max_[2 * node + 1]) + add_[node];
  }
  std::int64_t get_max(std::size_t node, std::size_t lo, std::size_t hi, std::size_t from,
                       std::size_t to) const {
    if (to <= lo || hi <= from) return std::numeric_limits<std::int64_t>::min();
    if (from <= lo && hi <= to) return max_[node];
    const std::size_t mid = (lo + hi) / 2;
    const std::int64_t below =
        std::max(get_max(2 * node, lo, mid, from, to), get_max(2 * node + 1, mid, hi, from, to));
    return below == std::numeric_limits<std::int64_t>::min() ? below : below + add_[node];
  }

  std::size_t n_;
  std::size_t size_;
  std::vector<std::int64_t> max_;  // of the subtree, its pending additions included
  std::vector<std::int64_t> add_;  // added to the whole subtree, not yet to its children
};

// The moments where the live bytes of members[begin, end) change (sorted, distinct),
// the bytes live from each until the next, and their largest: the group's LOAD.
class group_levels {
 public:
  group_levels(const std::vector<buffer>& buffers, const std::vector<std::size_t>& members,
               std::size_t begin, std::size_t end) {
    moments.reserve(2 * (end - begin));
    for (std::size_t k = begin; k < end; ++k) {
      moments.push_back(buffers[members[k]].lower);
      moments.push_back(buffers[members[k]].upper);
    }
    std::sort(moments.begin(), moments.end());
    moments.erase(std::unique(moments.begin(), moments.end()), moments.end());
    // Times of a trace are dense (event numbers): there a table finds a moment's index
    // at once, where a binary search would miss the cache at every step.
    const auto time_span = static_cast<std::uint64_t>(moments.back() - moments.front());
    if (time_span < 4 * static_cast<std::uint64_t>(moments.size()) + 64) {
      dense_.assign(time_span + 1, 0);
      for (std::size_t m = 0; m < moments.size(); ++m)
        dense_[static_cast<std::size_t>(moments[m] - moments.front())] =
            static_cast<std::uint32_t>(m);
    }
    level.assign(moments.size() + 1, 0);  // a difference array, then the levels
    for (std::size_t k = begin; k < end; ++k) {
      const buffer& b = buffers[members[k]];
      level[index_of(b.lower)] += b.size;
      level[index_of(b.upper)] -= b.size;
    }
    for (std::size_t m = 0; m < moments.size(); ++m) {
      if (m > 0) level[m] += level[m - 1];
      load = std::max(load, level[m]);
    }
  }
  // The index of moment t (one of moments).
  std::size_t index_of(std::int64_t t) const {
    if (!dense_.empty())
      return static_cast<std::size_t>(dense_[static_cast<std::size_t>(t - moments.front())]);
    return static_cast<std::size_t>(std::lower_bound(moments.begin(), moments.end(), t) -
                                    moments.begin());
  }

  std::vector<std::int64_t> moments;
  std::vector<std::int64_t> level;  // level[m]: live from moments[m] to moments[m + 1]
  std::int64_t load = 0;

 private:
  std::vector<std::uint32_t> dense_;  // time - moments[0] -> index, where times are dense
};

// Of members[begin, end) (one group, sorted by lower), the buffers to stack at the
// bottom first. A buffer at the bottom leaves its bytes empty while it is dead, so
// it may go there when, at every moment it is dead, the bytes live plus those of
// the stacked buffers dead then stay within the group's LOAD: the rest can then
// still be planned as low as LOAD above the stack. A buffer live over the group's
// whole span always qualifies; long-lived ones often do, and taking them out lets
// the rest split where only they crossed (a generate loop's two lasting buffers
// held its 677k buffers in one part). Buffers live over at least half the group are
// tried, longest first.
std::vector<bool> calculate_bottom_stack(const std::vector<buffer>& buffers,
                                         const std::vector<std::size_t>& members, std::size_t begin,
                                         std::size_t end) {
  const std::size_t n = end - begin;
  std::vector<bool> bottom(n, false);
  const group_levels group(buffers, members, begin, end);
  const std::vector<std::int64_t>& moments = group.moments;
  const std::int64_t load = group.load;
  // Candidates: the buffers live over at least half the group's span, longest first.
  const std::int64_t span = moments.back() - moments.front();
  std::vector<std::size_t> order;
  for (std::size_t x = 0; x < n; ++x) {
    const buffer& b = buffers[members[begin + x]];
    if (2 * (b.upper - b.lower) >= span) order.push_back(x);
  }
  std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    const buffer& a = buffers[members[begin + x]];
    const buffer& b = buffers[members[begin + y]];
    if (a.upper - a.lower != b.upper - b.lower) return a.upper - a.lower > b.upper - b.lower;
    return x < y;
  });
  // The levels of the sections between moments, each grown by the size of every
  // stacked buffer dead there.
  const std::size_t sections = moments.size() - 1;
  max_tree levels(std::vector<std::int64_t>(
      group.level.begin(), group.level.begin() + static_cast<std::ptrdiff_t>(sections)));
  for (const std::size_t x : order) {
    const buffer& b = buffers[members[begin + x]];
    const std::size_t first = group.index_of(b.lower), last = group.index_of(b.upper);
    const std::int64_t highest_dead =
        std::max(levels.get_max(0, first), levels.get_max(last, sections));
    if (highest_dead + b.size > load) continue;
    bottom[x] = true;
    levels.add(0, first, b.size);
    levels.add(last, sections, b.size);
  }
  return bottom;
}

// The buffers taken out of a group so that it splits, with their offsets in a band
// at the group's bottom, and the band's height.
struct band {
  std::vector<std::size_t> members;
  std::vector<std::int64_t> offsets;
  std::int64_t height = 0;
};

// A loop whose steps each leave a few small buffers alive into the next (a step's
// last token, a flag) is one group from its first step to its last. Cut it at the
// moments where the bytes crossing stay within a small fraction of its LOAD: the
// buffers crossing a cut are planned on their own as a band at the bottom, and the
// rest falls apart into steps. The band costs what its height adds to the bytes live
// without its buffers, past LOAD: it is kept only when that is within LOAD /
// kBandCostFraction (where every step reaches LOAD, a few bytes). Returns an empty
// band when no moment qualifies.
band calculate_band(const std::vector<buffer>& buffers, const std::vector<std::size_t>& members) {
  band result;
  // The bytes crossing a moment a buffer starts: those live both just before it and
  // just after it (the level there, less what starts there).
  const group_levels group(buffers, members, 0, members.size());
  const std::vector<std::int64_t>& moments = group.moments;
  const std::vector<std::int64_t>& level = group.level;
  const std::int64_t load = group.load;
  const auto index_of = [&](std::int64_t t) { return group.index_of(t); };
  std::vector<std::int64_t> starting(moments.size(), 0);
  for (const std::size_t i : members) starting[index_of(buffers[i].lower)] += buffers[i].size;
  const std::int64_t limit = load / kBandLoadFraction;
  // The more moments qualify, the more crossing buffers share the band and the
  // higher it grows: where the band is too high, only cheaper moments are cut.
  for (std::int64_t crossing_limit = limit; crossing_limit > 0; crossing_limit /= 4) {
    std::vector<std::int64_t> cuts;  // moments where buffers start and few bytes cross
    for (std::size_t m = 1; m + 1 < moments.size(); ++m) {
      if (starting[m] > 0 && level[m] - starting[m] <= crossing_limit) cuts.push_back(moments[m]);
    }
    if (cuts.empty()) return band{};
    result.members.clear();
    instance crossing;
    for (const std::size_t i : members) {
      const buffer& b = buffers[i];
      const auto next_cut = std::upper_bound(cuts.begin(), cuts.end(), b.lower);
      if (next_cut != cuts.end() && *next_cut < b.upper) {
        result.members.push_back(i);
        crossing.buffers.push_back(b);
      }
    }
    const plan stacked = greedy_in_order(crossing, size_order(crossing));
    result.height = height(crossing, stacked);
    // The level of the rest at each moment: the band's buffers taken out.
    std::vector<std::int64_t> rest_level(moments.size() + 1, 0);
    for (const std::size_t i : result.members) {
      rest_level[index_of(buffers[i].lower)] -= buffers[i].size;
      rest_level[index_of(buffers[i].upper)] += buffers[i].size;
    }
    std::int64_t highest_rest = 0;
    std::int64_t removed = 0;
    for (std::size_t m = 0; m < moments.size(); ++m) {
      removed += rest_level[m];
      highest_rest = std::max(highest_rest, level[m] + removed);
    }
    if (highest_rest + result.height - load <= load / kBandCostFraction) {
      result.offsets = stacked.offsets;
      return result;
    }
  }
  return band{};
}

// A loop whose steps each hand a buffer too large for a band to the next (unet's 6 MiB
// buffer, born after each step's peak and live through the next one's): the buffers
// handed on overlap in time, so a band of them is two high and costs a slot at every
// peak. Instead, cut the group at moments where few bytes cross, choosing in time order
// only moments whose crossing buffers are all born after those of the cut before have
// died (every other step, there): then the crossing buffers of every cut can share the
// group's bottom, each at its own offset only where it lives, and the pieces between
// the cuts are planned above that floor (a "resting" buffer, shared by the two pieces
// it reaches into), which costs nothing where the floor is as high as the bytes
// resting there. The cuts are kept only when, at every moment, the floor plus the
// bytes live above it stay within the group's LOAD.
struct floor_cut {
  std::vector<std::int64_t> cuts;     // the moments cut, increasing
  std::vector<std::size_t> resting;   // the buffers crossing them
  std::vector<std::int64_t> offsets;  // of each resting buffer, above the group's base
  std::vector<std::size_t> cut_of;    // the cut each resting buffer crosses
};

floor_cut calculate_floor_cut(const std::vector<buffer>& buffers,
                              const std::vector<std::size_t>& members) {
  const group_levels group(buffers, members, 0, members.size());
  const std::vector<std::int64_t>& moments = group.moments;
  const std::vector<std::int64_t>& level = group.level;
  std::vector<std::int64_t> starting(moments.size(), 0);
  for (const std::size_t i : members) starting[group.index_of(buffers[i].lower)] += buffers[i].size;
  const std::int64_t limit = group.load / kFloorCutLoadFraction;
  std::vector<std::size_t> by_lower = members;
  std::sort(by_lower.begin(), by_lower.end(),
            [&](std::size_t a, std::size_t b) { return buffers[a].lower < buffers[b].lower; });
  // Sweep the moments with the buffers live just before each, by death.
  std::set<std::pair<std::int64_t, std::size_t>> live;
  std::size_t next = 0;
  std::int64_t reach = std::numeric_limits<std::int64_t>::min();  // death of the last cut's buffers
  floor_cut result;
  for (std::size_t m = 1; m + 1 < moments.size(); ++m) {
    const std::int64_t t = moments[m];
    for (; next < by_lower.size() && buffers[by_lower[next]].lower < t; ++next)
      live.emplace(buffers[by_lower[next]].upper, by_lower[next]);
    while (!live.empty() && live.begin()->first <= t) live.erase(live.begin());
    if (starting[m] == 0 || level[m] - starting[m] > limit || live.empty()) continue;
    if (std::any_of(live.begin(), live.end(),
                    [&](const auto& entry) { return buffers[entry.second].lower < reach; }))
      continue;
    // Stacked at the bottom: the longest-lived above the cut lowest, where it outlives
    // the others (the next piece's floor).
    std::vector<std::size_t> crossing;
    for (const auto& entry : live) crossing.push_back(entry.second);
    std::int64_t offset = 0;
    for (auto it = crossing.rbegin(); it != crossing.rend(); ++it) {
      result.resting.push_back(*it);
      result.offsets.push_back(offset);
      result.cut_of.push_back(result.cuts.size());
      offset += buffers[*it].size;
    }
    result.cuts.push_back(t);
    reach = live.rbegin()->first;
  }
  if (result.cuts.empty()) return result;
  // The floor at each moment, and the bytes live above it.
  std::vector<std::int64_t> floor(moments.size(), 0);
  std::vector<std::int64_t> above(level.begin(), level.end());
  for (std::size_t k = 0; k < result.resting.size(); ++k) {
    const buffer& b = buffers[result.resting[k]];
    for (std::size_t m = group.index_of(b.lower); m < group.index_of(b.upper); ++m) {
      floor[m] = std::max(floor[m], result.offsets[k] + b.size);
      above[m] -= b.size;
    }
  }
  for (std::size_t m = 0; m < moments.size(); ++m) {
    if (floor[m] + above[m] > group.load) return floor_cut{};
  }
  return result;
}

}  // namespace

decomposition decompose(const instance& inst, bool cut_bands) {
  const std::vector<buffer>& buffers = inst.buffers;
  decomposition result;
  result.fixed_offsets.assign(buffers.size(), -1);
  struct work_item {
    std::vector<std::size_t> members;
    std::int64_t base;
  };
  std::vector<work_item> work;
  {
    std::vector<std::size_t> all(buffers.size());
    std::iota(all.begin(), all.end(), std::size_t{0});
    if (!all.empty()) work.push_back({std::move(all), 0});
  }
  while (!work.empty()) {
    work_item item = std::move(work.back());
    work.pop_back();
    std::vector<std::size_t>& members = item.members;
    std::sort(members.begin(), members.end(), [&](std::size_t a, std::size_t b) {
      if (buffers[a].lower != buffers[b].lower) return buffers[a].lower < buffers[b].lower;
      return a < b;
    });
    // Cut where no buffer crosses: a new group starts at a buffer born at or after the
    // last death of everything before it.
    std::vector<std::pair<std::size_t, std::size_t>> groups;  // [begin, end) in members
    std::int64_t reach = std::numeric_limits<std::int64_t>::min();
    for (std::size_t k = 0; k < members.size(); ++k) {
      const buffer& b = buffers[members[k]];
      if (k == 0 || b.lower >= reach) groups.emplace_back(k, k);
      groups.back().second = k + 1;
      reach = std::max(reach, b.upper);
    }
    for (const auto& [begin, end] : groups) {
      std::int64_t lowest = std::numeric_limits<std::int64_t>::max();
      std::int64_t highest = std::numeric_limits<std::int64_t>::min();
      for (std::size_t k = begin; k < end; ++k) {
        lowest = std::min(lowest, buffers[members[k]].lower);
        highest = std::max(highest, buffers[members[k]].upper);
      }
      // Buffers that can sit at the bottom, stacked, at no cost to the height: see
      // calculate_bottom_stack.
      std::int64_t base = item.base;
      std::vector<std::size_t> rest;
      const std::vector<bool> bottom = calculate_bottom_stack(buffers, members, begin, end);
      for (std::size_t k = begin; k < end; ++k) {
        const std::size_t i = members[k];
        if (bottom[k - begin]) {
          result.fixed_offsets[i] = base;
          base += buffers[i].size;
        } else {
          rest.push_back(i);
        }
      }
      if (rest.empty()) continue;
      if (base == item.base && groups.size() == 1) {
        // Only a group that holds most of the instance (a loop's steps held together)
        // is cut: a group of a few percent is one step, which is planned whole.
        const bool holds_most = 2 * rest.size() >= buffers.size();
        const band cut = cut_bands && holds_most && rest.size() > kBandMinBuffers
                             ? calculate_band(buffers, rest)
                             : band{};
        if (cut.members.empty()) {
          const floor_cut floors = cut_bands && holds_most && rest.size() > kBandMinBuffers
                                       ? calculate_floor_cut(buffers, rest)
                                       : floor_cut{};
          if (floors.cuts.empty()) {
            result.parts.push_back(part{std::move(rest), base, {}});  // nothing more to split
            continue;
          }
          // The pieces between the cuts become parts, each over the resting buffers of
          // the cuts at its two ends; they are not split again (the bottom stack would
          // not know of their floors).
          std::vector<part> pieces(floors.cuts.size() + 1);
          for (std::size_t k = 0; k < floors.resting.size(); ++k) {
            const std::size_t i = floors.resting[k];
            result.fixed_offsets[i] = base + floors.offsets[k];
            pieces[floors.cut_of[k]].resting.push_back(i);
            pieces[floors.cut_of[k] + 1].resting.push_back(i);
          }
          for (const std::size_t i : rest) {
            if (result.fixed_offsets[i] >= 0) continue;
            const auto piece =
                std::upper_bound(floors.cuts.begin(), floors.cuts.end(), buffers[i].lower) -
                floors.cuts.begin();
            pieces[static_cast<std::size_t>(piece)].members.push_back(i);
          }
          for (part& piece : pieces) {
            if (piece.members.empty()) continue;
            piece.base = base;
            result.parts.push_back(std::move(piece));
          }
          continue;
        }
        for (std::size_t k = 0; k < cut.members.size(); ++k)
          result.fixed_offsets[cut.members[k]] = base + cut.offsets[k];
        std::erase_if(rest, [&](std::size_t i) { return result.fixed_offsets[i] >= 0; });
        work.push_back({std::move(rest), base + cut.height});
      } else {
        work.push_back({std::move(rest), base});
      }
    }
  }
  return result;
}

part_search::part_search(const instance& inst, const std::vector<std::size_t>& members,
                         const std::vector<std::int64_t>* skyline, int depth,
                         const std::vector<floor_piece>* floors)
    : depth_(depth), buffer_count_(members.size()) {
  const std::size_t n = buffer_count_;
  std::vector<std::int64_t> points;
  points.reserve(2 * n);
  for (const std::size_t i : members) {
    points.push_back(inst.buffers[i].lower);
    points.push_back(inst.buffers[i].upper);
  }
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  section_count_ = points.empty() ? 0 : points.size() - 1;
  const auto section_of = [&](std::int64_t time) {
    return static_cast<std::uint32_t>(std::lower_bound(points.begin(), points.end(), time) -
                                      points.begin());
  };
  first_section_.resize(n);
  end_section_.resize(n);
  size_.resize(n);
  std::vector<std::int64_t> live_delta(section_count_ + 1, 0);
  granule_ = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const buffer& b = inst.buffers[members[k]];
    first_section_[k] = section_of(b.lower);
    end_section_[k] = section_of(b.upper);
    size_[k] = b.size;
    granule_ = std::gcd(granule_, b.size);
    live_delta[first_section_[k]] += b.size;
    live_delta[end_section_[k]] -= b.size;
  }
  if (granule_ == 0) granule_ = 1;
  initial_floor_.assign(section_count_, 0);
  if (skyline != nullptr) {
    // Time here counts the sections of the search that split this part off.
    for (std::size_t s = 0; s < section_count_; ++s) {
      for (auto t = points[s]; t < points[s + 1]; ++t) {
        initial_floor_[s] = std::max(initial_floor_[s], (*skyline)[static_cast<std::size_t>(t)]);
      }
    }
  }
  if (floors != nullptr) {
    for (const floor_piece& f : *floors) {
      // The sections that overlap [lower, upper): from the one holding `lower` on.
      auto s = static_cast<std::size_t>(std::upper_bound(points.begin(), points.end(), f.lower) -
                                        points.begin());
      for (s = s > 0 ? s - 1 : 0; s < section_count_ && points[s] < f.upper; ++s) {
        initial_floor_[s] = std::max(initial_floor_[s], f.top);
      }
    }
  }
  std::size_t slots = 4096;
  while (slots < 64 * n && slots < kFailedStateSlots) slots *= 2;
  failed_slots_ = slots;
  std::int64_t live = 0;
  for (std::size_t s = 0; s < section_count_; ++s) {
    live += live_delta[s];
    load_ = std::max(load_, live);
  }
  if (count_overlap_pairs() > kMaxOverlapPairs) {
    too_dense_ = true;
    return;
  }

  // Orders among candidates, one per restart flavour. Each puts identical buffers
  // next to each other, which the branching relies on to try only one of them.
  std::vector<std::int64_t> time_span(n);
  for (std::size_t k = 0; k < n; ++k)
    time_span[k] = points[end_section_[k]] - points[first_section_[k]];
  const auto make_order = [&](auto&& key) {
    std::vector<std::uint32_t> order(n);
    std::iota(order.begin(), order.end(), std::uint32_t{0});
    std::sort(order.begin(), order.end(), [&](std::uint32_t x, std::uint32_t y) {
      const auto key_x = key(x);
      const auto key_y = key(y);
      if (key_x != key_y) return key_x > key_y;
      if (first_section_[x] != first_section_[y]) return first_section_[x] < first_section_[y];
      return x < y;
    });
    return order;
  };
  const auto span = [&](std::uint32_t b) {
    return static_cast<std::int64_t>(end_section_[b] - first_section_[b]);
  };
  // Long-lived buffers constrain the most sections; large ones are hardest to fit late.
  // Areas (time x bytes) go past 2^63: they are compared as doubles.
  const auto area = [&](std::int64_t time, std::uint32_t b) {
    return static_cast<double>(time) * static_cast<double>(size_[b]);
  };
  orders_.push_back(make_order([&](std::uint32_t b) { return std::pair(span(b), size_[b]); }));
  orders_.push_back(
      make_order([&](std::uint32_t b) { return std::pair(area(time_span[b], b), span(b)); }));
  orders_.push_back(make_order([&](std::uint32_t b) { return std::pair(time_span[b], size_[b]); }));
  orders_.push_back(make_order([&](std::uint32_t b) { return std::pair(size_[b], span(b)); }));
  orders_.push_back(
      make_order([&](std::uint32_t b) { return std::pair(area(span(b), b), size_[b]); }));
  identity_.resize(n);
  {
    const std::vector<std::uint32_t>& order = orders_.front();
    for (std::size_t rank = 0; rank < n; ++rank) {
      const std::uint32_t b = order[rank];
      const std::uint32_t a = rank > 0 ? order[rank - 1] : b;
      const bool same = rank > 0 && first_section_[a] == first_section_[b] &&
                        end_section_[a] == end_section_[b] && size_[a] == size_[b];
      identity_[b] = same ? identity_[a] : b;
    }
  }
  priority_.resize(n);
  fit_score_.assign(n, 0);

  // Time overlaps, as compressed adjacency lists: sweep buffers by first section and
  // pair each with those still live.
  std::vector<std::uint32_t> by_start(n);
  std::iota(by_start.begin(), by_start.end(), std::uint32_t{0});
  std::sort(by_start.begin(), by_start.end(), [&](std::uint32_t a, std::uint32_t b) {
    return first_section_[a] < first_section_[b];
  });
  std::vector<std::uint32_t> degree(n, 0);
  const auto sweep = [&](auto&& on_pair) {
    std::vector<std::uint32_t> active;
    for (const std::uint32_t b : by_start) {
      std::size_t kept = 0;
      for (const std::uint32_t a : active) {
        if (end_section_[a] > first_section_[b]) active[kept++] = a;
      }
      active.resize(kept);
      for (const std::uint32_t a : active) on_pair(a, b);
      active.push_back(b);
    }
  };
  sweep([&](std::uint32_t a, std::uint32_t b) {
    ++degree[a];
    ++degree[b];
  });
  overlap_begin_.assign(n + 1, 0);
  for (std::size_t k = 0; k < n; ++k) overlap_begin_[k + 1] = overlap_begin_[k] + degree[k];
  overlap_.resize(overlap_begin_[n]);
  std::vector<std::uint32_t> fill(overlap_begin_.begin(), overlap_begin_.end() - 1);
  sweep([&](std::uint32_t a, std::uint32_t b) {
    overlap_[fill[a]++] = b;
    overlap_[fill[b]++] = a;
  });
  smallest_neighbour_.assign(n, std::numeric_limits<std::int64_t>::max() / 4);
  for (std::size_t k = 0; k < n; ++k) {
    for (std::uint32_t j = overlap_begin_[k]; j < overlap_begin_[k + 1]; ++j)
      smallest_neighbour_[k] = std::min(smallest_neighbour_[k], size_[overlap_[j]]);
  }
  buffer_keys_.resize(n);
  for (std::size_t k = 0; k < n; ++k) buffer_keys_[k] = mix64(0x5eed0000ULL + k);
}

std::uint64_t part_search::state_key() const {
  std::uint64_t key = mix64(placed_hash_ ^ static_cast<std::uint64_t>(level_));
  for (std::size_t s = 0; s < section_count_; ++s) {
    // Only sections with bytes left matter. Floors below the level count too: the
    // dominance cut in prepare_node() depends on them.
    const std::int64_t value = remaining_[s] == 0 ? -2 : floor_[s];
    key = mix64(key ^ static_cast<std::uint64_t>(value));
  }
  return key == 0 ? 1 : key;
}

void part_search::remember_failed(std::uint64_t key) {
  failed_states_[key & (failed_slots_ - 1)] = key;
}

bool part_search::known_failed(std::uint64_t key) const {
  return failed_states_[key & (failed_slots_ - 1)] == key;
}

void part_search::reset() {
  const std::size_t n = buffer_count_;
  level_ = 0;
  floor_ = initial_floor_;
  lower_bound_.assign(section_count_, 0);
  remaining_.assign(section_count_, 0);
  for (std::size_t b = 0; b < n; ++b) {
    for (std::uint32_t s = first_section_[b]; s < end_section_[b]; ++s) remaining_[s] += size_[b];
  }
  offset_floor_.assign(n, 0);
  for (std::size_t b = 0; b < n; ++b) {
    for (std::uint32_t s = first_section_[b]; s < end_section_[b]; ++s)
      offset_floor_[b] = std::max(offset_floor_[b], floor_[s]);
  }
  solved_ = false;
  transition_stops_.clear();
  banned_at_.assign(n, -1);
  offset_.assign(n, -1);
  unplaced_.resize(n);
  position_.resize(n);
  for (std::uint32_t b = 0; b < n; ++b) {
    unplaced_[b] = b;
    position_[b] = b;
  }
  trail_.clear();
  choices_.clear();
  options_.clear();
  coverage_.assign(section_count_ + 1, 0);
  section_start_.assign(section_count_ + 1, 0);
  placed_hash_ = 0;
  transition_keys_.clear();
}

void part_search::place(std::uint32_t b) {
  offset_[b] = level_;
  const std::uint32_t at = position_[b];
  const std::uint32_t last = unplaced_.back();
  unplaced_[at] = last;
  position_[last] = at;
  unplaced_.pop_back();
  trail_.push_back({undo_kind::placed, b, at});
  placed_hash_ ^= buffer_keys_[b];
  const std::int64_t top = level_ + size_[b];
  for (std::uint32_t s = first_section_[b]; s < end_section_[b]; ++s) {
    trail_.push_back({undo_kind::floor, s, floor_[s]});
    floor_[s] = top;
    remaining_[s] -= size_[b];
  }
  for (std::uint32_t k = overlap_begin_[b]; k < overlap_begin_[b + 1]; ++k) {
    const std::uint32_t d = overlap_[k];
    if (offset_[d] < 0 && offset_floor_[d] < top) {
      trail_.push_back({undo_kind::offset_floor, d, offset_floor_[d]});
      offset_floor_[d] = top;
    }
  }
}

void part_search::leave_section_empty(const choice_point& point) {
  const std::uint32_t s = point.section;
  trail_.push_back({undo_kind::lower_bound, s, lower_bound_[s]});
  // Nothing covers s at this level, so the next buffer over s rests higher: on a
  // buffer placed from now on (its lowest neighbour in time at least) or on a floor
  // above the level.
  std::int64_t next_cover = std::numeric_limits<std::int64_t>::max();
  for (const std::uint32_t c : unplaced_) {
    if (first_section_[c] > s || s >= end_section_[c]) continue;
    const std::int64_t f = offset_floor_[c];
    next_cover = std::min(next_cover, f > level_ ? f : level_ + smallest_neighbour_[c]);
  }
  lower_bound_[s] = std::min(next_cover, capacity_ + 1);
  for (std::size_t k = point.options_begin; k < point.options_end; ++k) {
    const std::uint32_t c = options_[k];
    trail_.push_back({undo_kind::ban, c, banned_at_[c]});
    banned_at_[c] = level_;
  }
}

void part_search::undo_to(std::size_t mark) {
  while (trail_.size() > mark) {
    const undo_entry entry = trail_.back();
    trail_.pop_back();
    switch (entry.kind) {
      case undo_kind::floor:
        floor_[entry.index] = entry.old_value;
        break;
      case undo_kind::lower_bound:
        lower_bound_[entry.index] = entry.old_value;
        break;
      case undo_kind::offset_floor:
        offset_floor_[entry.index] = entry.old_value;
        break;
      case undo_kind::ban:
        banned_at_[entry.index] = entry.old_value;
        break;
      case undo_kind::level:
        // Everything below this rise of the level has been tried, unless a split-off
        // part gave up on its node budget there.
        if (transition_stops_.back() == stopped_parts_) remember_failed(transition_keys_.back());
        transition_keys_.pop_back();
        transition_stops_.pop_back();
        level_ = entry.old_value;
        break;
      case undo_kind::placed: {
        const std::uint32_t b = entry.index;
        const auto at = static_cast<std::uint32_t>(entry.old_value);
        if (at == unplaced_.size()) {
          unplaced_.push_back(b);
        } else {
          const std::uint32_t moved = unplaced_[at];
          unplaced_.push_back(moved);
          position_[moved] = static_cast<std::uint32_t>(unplaced_.size() - 1);
          unplaced_[at] = b;
        }
        position_[b] = at;
        offset_[b] = -1;
        placed_hash_ ^= buffer_keys_[b];
        for (std::uint32_t s = first_section_[b]; s < end_section_[b]; ++s) {
          remaining_[s] += size_[b];
        }
        break;
      }
    }
  }
}

bool part_search::prepare_node() {
  candidates_.clear();
  std::int64_t next_level = std::numeric_limits<std::int64_t>::max();
  for (const std::uint32_t b : unplaced_) {
    const std::int64_t f = offset_floor_[b];
    if (f == level_) {
      if (banned_at_[b] != level_) candidates_.push_back(b);
    } else if (f > level_) {
      next_level = std::min(next_level, f);
    }
  }
  if (candidates_.empty()) {
    // Everything still unplaced rests above the level (or waits for a buffer below
    // it that can no longer come): move up.
    if (next_level == std::numeric_limits<std::int64_t>::max()) return false;
    trail_.push_back({undo_kind::level, 0, level_});
    level_ = next_level;
    transition_keys_.push_back(state_key());
    transition_stops_.push_back(stopped_parts_);
    if (known_failed(transition_keys_.back())) return false;
    for (std::size_t s = 0; s < section_count_; ++s) {
      if (remaining_[s] == 0) continue;
      const std::int64_t start = std::max({floor_[s], lower_bound_[s], level_});
      if (start + remaining_[s] > capacity_) return false;
    }
    for (const std::uint32_t b : unplaced_) {
      const std::int64_t f = offset_floor_[b];
      if (f == level_) {
        candidates_.push_back(b);
      } else if (f < level_ && f + size_[b] <= level_) {
        // b could drop into the gap under the level, which nothing fills any more: a
        // plan with b there is no higher, so this one need not be completed.
        return false;
      }
    }
    if (!check_section_starts()) return false;
    return depth_ >= kMaxSplitDepth || solve_split_parts();
  }
  return check_section_starts();
}

bool part_search::solve_split_parts() {
  // After a rise of the level, the unplaced buffers may fall into groups that share no
  // moment: each can then be searched alone above the floors, so that a failure in one
  // does not send the search back through choices made in the others.
  std::fill(coverage_.begin(), coverage_.end(), 0);
  for (const std::uint32_t b : unplaced_) {
    ++coverage_[first_section_[b] + 1];
    --coverage_[end_section_[b]];
  }
  // A group starts at section s when no unplaced buffer lives on both sides of s.
  split_group_.assign(section_count_, 0);
  std::uint32_t group = 0;
  std::int32_t crossing = 0;
  for (std::size_t s = 0; s < section_count_; ++s) {
    crossing += coverage_[s];
    if (s > 0 && crossing == 0) ++group;
    split_group_[s] = group;
  }
  if (group == 0) return true;
  std::vector<std::vector<std::uint32_t>> groups(group + 1);
  for (const std::uint32_t b : unplaced_) groups[split_group_[first_section_[b]]].push_back(b);
  std::erase_if(groups, [](const std::vector<std::uint32_t>& g) { return g.empty(); });
  if (groups.size() < 2) return true;
  std::sort(groups.begin(), groups.end(),
            [](const auto& a, const auto& b) { return a.size() < b.size(); });
  std::vector<std::int64_t> part_offsets;
  for (const std::vector<std::uint32_t>& members : groups) {
    std::uint64_t key = 0x9a11ULL;
    std::uint32_t lowest = std::numeric_limits<std::uint32_t>::max();
    std::uint32_t highest = 0;
    for (const std::uint32_t b : members) {
      key ^= buffer_keys_[b];
      lowest = std::min(lowest, first_section_[b]);
      highest = std::max(highest, end_section_[b]);
    }
    for (std::uint32_t s = lowest; s < highest; ++s) {
      key = mix64(key ^ static_cast<std::uint64_t>(floor_[s]));
    }
    if (failed_parts_.contains(key)) return false;
    instance sub;
    std::vector<std::size_t> all(members.size());
    for (std::size_t k = 0; k < members.size(); ++k) {
      const std::uint32_t b = members[k];
      sub.buffers.push_back(
          buffer{static_cast<std::int64_t>(k), first_section_[b], end_section_[b], size_[b]});
      all[k] = k;
    }
    part_search child(sub, all, &floor_, depth_ + 1);
    const std::uint64_t limit = std::min(node_limit_, run_stop_at_);
    const std::uint64_t budget = limit > nodes_ ? limit - nodes_ : 0;
    const search_status status = child.run(capacity_, deadline_, part_offsets, budget);
    nodes_ += child.nodes();
    if (status == search_status::infeasible) {
      failed_parts_.insert(key);
      return false;
    }
    if (status == search_status::stopped) {
      ++stopped_parts_;
      return false;
    }
    for (std::size_t k = 0; k < members.size(); ++k)
      split_offsets_.emplace_back(members[k], part_offsets[k]);
  }
  // Every group fits: the whole part is done.
  for (const auto& [b, offset] : split_offsets_) offset_[b] = offset;
  split_offsets_.clear();
  solved_ = true;
  return true;
}

void part_search::sort_elevated() {
  // Highest start first. Starts are multiples of the granule below the capacity, so
  // when the range is short a counting sort is much cheaper than comparisons.
  const std::int64_t buckets = (capacity_ - level_) / granule_ + 1;
  if (buckets > 4 * static_cast<std::int64_t>(elevated_.size()) + 256) {
    std::sort(elevated_.begin(), elevated_.end(),
              [](const start_entry& a, const start_entry& b) { return a.start > b.start; });
    return;
  }
  bucket_counts_.assign(static_cast<std::size_t>(buckets) + 1, 0);
  const auto bucket_of = [&](const start_entry& e) {
    return static_cast<std::size_t>((capacity_ - e.start) / granule_);
  };
  for (const start_entry& e : elevated_) ++bucket_counts_[bucket_of(e) + 1];
  for (std::size_t k = 1; k < bucket_counts_.size(); ++k)
    bucket_counts_[k] += bucket_counts_[k - 1];
  sorted_elevated_.resize(elevated_.size());
  for (const start_entry& e : elevated_) sorted_elevated_[bucket_counts_[bucket_of(e)]++] = e;
  elevated_.swap(sorted_elevated_);
}

bool part_search::check_section_starts() {
  // The lowest offset each unplaced buffer can still take ("start"): a candidate may
  // go at the level, one resting higher at its offset_floor, and one that may not go
  // at the level (banned, or waiting below it) only on top of something placed from
  // now on, so a granule above the level at least.
  //
  // For every section and every x, the buffers live there that cannot start below x
  // must fit between x and the capacity. Only three kinds of x can bind: the section's
  // own floor (everything is above it), level + granule (all but the candidates are
  // above it) and the start of each buffer raised above that ("elevated").
  std::fill(section_start_.begin(), section_start_.end(), 0);  // bytes that may start at the level
  elevated_.clear();
  const std::int64_t above_level = level_ + granule_;
  for (const std::uint32_t b : unplaced_) {
    std::int64_t start = offset_floor_[b];
    if (start < level_ || (start == level_ && banned_at_[b] == level_)) {
      start = level_ + smallest_neighbour_[b];
    }
    if (start + size_[b] > capacity_) return false;
    if (start == level_) {  // as a difference array: spans can be long
      section_start_[first_section_[b]] += size_[b];
      section_start_[end_section_[b]] -= size_[b];
    } else if (start > above_level) {
      elevated_.push_back({start, b});
    }
  }
  std::int64_t at_level = 0;
  for (std::size_t s = 0; s < section_count_; ++s) {
    at_level += section_start_[s];
    if (remaining_[s] == 0) continue;
    const std::int64_t base = std::max({floor_[s], lower_bound_[s], level_});
    if (base + remaining_[s] > capacity_) return false;
    if (above_level + remaining_[s] - at_level > capacity_) return false;
  }
  // The elevated pass costs the spans of most unplaced buffers; on large parts it
  // would make each node as slow as a whole greedy pass, so only the cheap bounds run.
  if (elevated_.empty() || buffer_count_ > kElevatedBoundMaxBuffers) return true;
  sort_elevated();
  std::fill(section_start_.begin(), section_start_.end(), 0);  // now: elevated bytes so far
  for (const start_entry& entry : elevated_) {
    const std::uint32_t b = entry.buffer;
    const std::int64_t room = capacity_ - entry.start;
    for (std::uint32_t s = first_section_[b]; s < end_section_[b]; ++s) {
      section_start_[s] += size_[b];
      if (section_start_[s] > room) return false;
    }
  }
  return true;
}

bool part_search::branch() {
  // Coverage of each section by the candidates, as a difference array.
  std::fill(coverage_.begin(), coverage_.end(), 0);
  for (const std::uint32_t c : candidates_) {
    ++coverage_[first_section_[c]];
    --coverage_[end_section_[c]];
  }
  const std::int64_t room = capacity_ - level_;
  std::int64_t best_slack = std::numeric_limits<std::int64_t>::max();
  std::int32_t best_coverage = std::numeric_limits<std::int32_t>::max();
  std::size_t best_section = section_count_;
  std::int32_t covered = 0;
  for (std::size_t s = 0; s < section_count_; ++s) {
    covered += coverage_[s];
    if (remaining_[s] == 0 || floor_[s] > level_ || lower_bound_[s] > level_) continue;
    const std::int64_t slack = room - remaining_[s];
    if (covered == 0) {
      // Nothing can start here at this level, so the section loses a granule at least.
      if (slack < granule_) return false;
      continue;
    }
    // Rules 0-2 take the tightest section and break ties by the fewest candidates
    // (fail first), the earliest, or the most candidates; rule 3 takes the fewest
    // candidates first, rule 4 the earliest section, rule 5 the latest. Restarts vary it.
    const bool better_tie = section_tie_rule_ == 0   ? covered < best_coverage
                            : section_tie_rule_ == 2 ? covered > best_coverage
                                                     : false;
    bool better = slack < best_slack || (slack == best_slack && better_tie);
    if (section_tie_rule_ == 3) {
      better = covered < best_coverage || (covered == best_coverage && slack < best_slack);
    } else if (section_tie_rule_ == 4) {
      better = best_section == section_count_;
    } else if (section_tie_rule_ == 5) {
      better = true;  // the latest
    }
    if (better) {
      best_slack = slack;
      best_coverage = covered;
      best_section = s;
    }
  }
  if (best_section == section_count_) return false;

  const std::size_t begin = options_.size();
  for (const std::uint32_t c : candidates_) {
    if (first_section_[c] <= best_section && best_section < end_section_[c]) options_.push_back(c);
  }
  // Prefer buffers that fill the open stretch around the section flush at its ends
  // and whose top meets the floor beside it: such placements leave no step behind.
  std::size_t valley_begin = best_section;
  std::size_t valley_end = best_section + 1;
  const auto open = [&](std::size_t s) { return floor_[s] <= level_ && lower_bound_[s] <= level_; };
  while (valley_begin > 0 && open(valley_begin - 1)) --valley_begin;
  while (valley_end < section_count_ && open(valley_end)) ++valley_end;
  const std::int64_t left_floor = valley_begin > 0 ? floor_[valley_begin - 1] : capacity_;
  const std::int64_t right_floor = valley_end < section_count_ ? floor_[valley_end] : capacity_;
  for (std::size_t k = begin; k < options_.size(); ++k) {
    const std::uint32_t c = options_[k];
    const std::int64_t top = level_ + size_[c];
    std::int64_t score = 0;
    if (first_section_[c] == valley_begin) score += 2 + (top == left_floor ? 1 : 0);
    if (end_section_[c] == valley_end) score += 2 + (top == right_floor ? 1 : 0);
    fit_score_[c] = score;
  }
  std::sort(options_.begin() + static_cast<std::ptrdiff_t>(begin), options_.end(),
            [&](std::uint32_t a, std::uint32_t b) {
              if (fit_score_[a] != fit_score_[b]) return fit_score_[a] > fit_score_[b];
              return priority_[a] < priority_[b];
            });
  choices_.push_back(choice_point{trail_.size(), begin, options_.size(), begin,
                                  static_cast<std::uint32_t>(best_section),
                                  best_slack >= granule_});
  return backtrack();
}

bool part_search::backtrack() {
  while (!choices_.empty()) {
    choice_point& point = choices_.back();
    undo_to(point.trail_mark);
    // Identical buffers are interchangeable: try only the first of each run.
    while (point.next_option < point.options_end && point.next_option > point.options_begin &&
           identity_[options_[point.next_option]] == identity_[options_[point.next_option - 1]]) {
      ++point.next_option;
    }
    if (point.next_option < point.options_end) {
      place(options_[point.next_option++]);
      return true;
    }
    if (point.may_leave_empty) {
      point.may_leave_empty = false;
      leave_section_empty(point);
      return true;
    }
    options_.resize(point.options_begin);
    choices_.pop_back();
  }
  return false;
}

void part_search::configure_run(std::uint64_t run_index, std::uint64_t& random) {
  // The first runs try each order plainly; later ones also shuffle them a little.
  static constexpr int kRules[] = {0, 3, 4, 2, 5, 1};
  const std::size_t flavours = orders_.size() * std::size(kRules);
  const std::size_t flavour = run_index % flavours;
  const std::vector<std::uint32_t>& base = orders_[flavour % orders_.size()];
  section_tie_rule_ = kRules[flavour / orders_.size()];
  std::vector<std::uint32_t> order = base;
  if (run_index >= flavours) {
    for (std::size_t k = 0; k + 1 < order.size(); ++k) {
      random = mix64(random);
      if (random % 4 == 0) std::swap(order[k], order[k + 1]);
    }
  }
  // Keep identical buffers adjacent whatever the shuffle did: rank them by the rank of
  // the first of their kind.
  std::vector<std::int64_t> first_rank(buffer_count_, -1);
  for (std::size_t rank = 0; rank < order.size(); ++rank) {
    const std::uint32_t kind = identity_[order[rank]];
    if (first_rank[kind] < 0) first_rank[kind] = static_cast<std::int64_t>(rank);
  }
  for (std::size_t rank = 0; rank < order.size(); ++rank) {
    const std::uint32_t b = order[rank];
    priority_[b] = first_rank[identity_[b]] * static_cast<std::int64_t>(buffer_count_) +
                   static_cast<std::int64_t>(rank);
  }
}

// Pairs live at the same time, without listing them: a buffer overlaps those that
// started before it (or with it, earlier in order) and have not ended.
std::uint64_t part_search::count_overlap_pairs() const {
  std::vector<std::uint32_t> starts(first_section_), ends(end_section_);
  std::sort(starts.begin(), starts.end());
  std::sort(ends.begin(), ends.end());
  std::uint64_t pairs = 0;
  for (std::size_t rank = 0; rank < starts.size(); ++rank) {
    const auto ended = std::upper_bound(ends.begin(), ends.end(), starts[rank]) - ends.begin();
    pairs += rank - static_cast<std::size_t>(ended);
  }
  return pairs;
}

search_status part_search::run(std::int64_t capacity, clock::time_point deadline,
                               std::vector<std::int64_t>& offsets, std::uint64_t node_limit) {
  capacity_ = capacity;
  deadline_ = deadline;
  node_limit_ = node_limit == 0 ? 0 : (node_limit > ~0ULL - nodes_ ? ~0ULL : nodes_ + node_limit);
  failed_states_.assign(failed_slots_, 0);  // nogoods hold for one capacity only
  failed_parts_.clear();
  stopped_parts_ = 0;
  if (node_limit == 0) return search_status::stopped;
  if (load_ > capacity) return search_status::infeasible;
  if (too_dense_) return search_status::stopped;
  // Runs are restarted after a node budget that follows the Luby sequence (1 1 2 1 1 2
  // 4 ...): how long a run needs varies wildly with the order, so many short runs
  // with different orders beat one long one, while the long runs still come and can
  // prove infeasibility. Exhausted states found by any run stay known to the next.
  std::uint64_t random = 0x243f6a8885a308d3ULL ^ static_cast<std::uint64_t>(capacity);
  const std::uint64_t restart_unit = kRestartNodes + 4 * buffer_count_;
  for (std::uint64_t run_index = 0;; ++run_index) {
    configure_run(run_index, random);
    reset();
    const std::uint64_t budget = luby(run_index + 1) * restart_unit;
    const std::uint64_t stop_at = budget > ~0ULL - nodes_ ? ~0ULL : nodes_ + budget;
    run_stop_at_ = stop_at;
    const std::uint64_t stops_before = stopped_parts_;
    bool restart = false;
    split_offsets_.clear();
    while (!unplaced_.empty() && !solved_) {
      if ((++nodes_ & 15) == 0 && clock::now() > deadline) return search_status::stopped;
      if (nodes_ >= node_limit_) return search_status::stopped;
      if (nodes_ >= stop_at) {
        restart = true;
        break;
      }
      split_offsets_.clear();
      if (!prepare_node() || solved_ || !branch()) {
        if (solved_) break;
        if (!backtrack()) {
          if (stopped_parts_ == stops_before) return search_status::infeasible;
          restart = true;  // a split-off part gave up: not proven, try again
          break;
        }
      }
    }
    if (restart) continue;
    offsets = offset_;
    return search_status::found;
  }
}

}  // namespace memkit::planner::detail

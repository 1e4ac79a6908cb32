// Chains of copies laid out in fixed slots (chain_slots in planner/search.hpp).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <tuple>
#include <utility>
#include <vector>

#include "memkit/planner.hpp"
#include "planner/search.hpp"

namespace memkit::planner::detail {
namespace {

// Only buffers of at least this share of LOAD form chains: smaller ones cannot leave
// a hole that matters.
constexpr std::int64_t kChainMinShare = 1024;
// A successor is born at most this many events before or after its predecessor dies.
constexpr std::int64_t kChainNearEvents = 4;
// ... and differs from it in size by at most this share (a cache grows by one token).
constexpr double kChainSizeTolerance = 0.05;
// Shorter chains are left to best fit, and so are groups of fewer chains.
constexpr std::size_t kMinChainLength = 8;
constexpr std::size_t kMinChainsInGroup = 4;
// Slots above the chains' own, for the copies that overlap their chains' buffers.
constexpr std::int64_t kSpareSlots = 2;

struct link_candidate {
  bool gap;               // born after the predecessor died (a copy overlaps it)
  std::int64_t distance;  // events between the predecessor's death and this birth
  std::int64_t size_difference;
  std::size_t from;
  std::size_t to;
  bool operator<(const link_candidate& other) const {
    return std::tie(gap, distance, size_difference, from, to) <
           std::tie(other.gap, other.distance, other.size_difference, other.from, other.to);
  }
};

bool near_in_size(std::int64_t a, std::int64_t b) {
  return static_cast<double>(std::max(a, b) - std::min(a, b)) <=
         kChainSizeTolerance * static_cast<double>(std::min(a, b));
}

// The chains among the large buffers: each a list of buffers in time order. Links are
// taken best first (a copy before a gap, then the nearest in time and size), each
// buffer having at most one predecessor and one successor.
std::vector<std::vector<std::size_t>> find_chains(const instance& inst) {
  const std::vector<buffer>& buffers = inst.buffers;
  const std::int64_t min_size = std::max<std::int64_t>(1, load(inst) / kChainMinShare);
  std::vector<std::size_t> large;
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].size >= min_size) large.push_back(i);
  }
  std::sort(large.begin(), large.end(),
            [&](std::size_t a, std::size_t b) { return buffers[a].lower < buffers[b].lower; });
  std::vector<link_candidate> candidates;
  for (const std::size_t from : large) {
    const buffer& p = buffers[from];
    auto it =
        std::lower_bound(large.begin(), large.end(), p.upper - kChainNearEvents,
                         [&](std::size_t i, std::int64_t time) { return buffers[i].lower < time; });
    for (; it != large.end() && buffers[*it].lower <= p.upper + kChainNearEvents; ++it) {
      const buffer& s = buffers[*it];
      if (s.lower <= p.lower || s.upper <= p.upper || !near_in_size(p.size, s.size)) continue;
      candidates.push_back(
          {s.lower >= p.upper, std::abs(s.lower - p.upper), std::abs(s.size - p.size), from, *it});
    }
  }
  std::sort(candidates.begin(), candidates.end());
  constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
  std::vector<std::size_t> next(buffers.size(), kNone);
  std::vector<bool> has_previous(buffers.size(), false);
  for (const link_candidate& c : candidates) {
    if (next[c.from] != kNone || has_previous[c.to]) continue;
    next[c.from] = c.to;
    has_previous[c.to] = true;
  }
  std::vector<std::vector<std::size_t>> chains;
  for (const std::size_t head : large) {
    if (has_previous[head] || next[head] == kNone) continue;
    std::vector<std::size_t> chain;
    for (std::size_t i = head; i != kNone; i = next[i]) chain.push_back(i);
    if (chain.size() >= kMinChainLength) chains.push_back(std::move(chain));
  }
  return chains;
}

}  // namespace

chain_slots::chain_slots(const instance& inst, std::int64_t goal)
    : inst_(inst), goal_(goal), time_(inst) {
  const std::vector<buffer>& buffers = inst.buffers;
  std::vector<std::vector<std::size_t>> chains = find_chains(inst);
  if (chains.size() < kMinChainsInGroup) return;

  // Groups of chains whose largest buffers are of about one size; the group whose
  // slots hold the most bytes is laid out.
  std::vector<std::int64_t> largest(chains.size(), 0);
  for (std::size_t c = 0; c < chains.size(); ++c) {
    for (const std::size_t i : chains[c]) largest[c] = std::max(largest[c], buffers[i].size);
  }
  std::vector<std::size_t> by_size(chains.size());
  std::iota(by_size.begin(), by_size.end(), std::size_t{0});
  std::sort(by_size.begin(), by_size.end(),
            [&](std::size_t a, std::size_t b) { return largest[a] > largest[b]; });
  std::size_t group_begin = 0;
  std::size_t group_end = 0;
  for (std::size_t begin = 0; begin < by_size.size();) {
    std::size_t end = begin + 1;
    while (end < by_size.size() && near_in_size(largest[by_size[begin]], largest[by_size[end]]))
      ++end;
    const auto bytes = [&](std::size_t b, std::size_t e) {
      return static_cast<double>(e - b) * static_cast<double>(largest[by_size[b]]);
    };
    if (bytes(begin, end) > bytes(group_begin, group_end)) {
      group_begin = begin;
      group_end = end;
    }
    begin = end;
  }
  const std::int64_t chain_count = static_cast<std::int64_t>(group_end - group_begin);
  if (static_cast<std::size_t>(chain_count) < kMinChainsInGroup) return;
  const std::int64_t slot = largest[by_size[group_begin]];
  std::vector<bool> in_group(buffers.size(), false);
  for (std::size_t g = group_begin; g < group_end; ++g) {
    for (const std::size_t i : chains[by_size[g]]) in_group[i] = true;
  }

  const sections& time = time_;
  const std::vector<std::int64_t>& points = time.points;
  // A slot is as high as the group's largest buffer: where the group's buffers are
  // smaller (a cache early in a generate call, with the prompt's activations around
  // it), their slots would not leave room for the other buffers live then. Those
  // buffers are left to best fit, until every moment has room: the bytes of the other
  // buffers plus a slot for each of the group's buffers live then stay within `goal`.
  std::vector<std::int64_t> others(points.size() + 1);      // bytes live outside the slots
  std::vector<std::int64_t> group_live(points.size() + 1);  // the group's buffers live
  for (bool removed = true; removed;) {
    std::fill(others.begin(), others.end(), 0);
    std::fill(group_live.begin(), group_live.end(), 0);
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      std::vector<std::int64_t>& count = in_group[i] ? group_live : others;
      const std::int64_t amount = in_group[i] ? 1 : buffers[i].size;
      count[time.of(buffers[i].lower)] += amount;
      count[time.of(buffers[i].upper)] -= amount;
    }
    std::vector<bool> crowded(points.size(), false);
    for (std::size_t t = 0; t < points.size(); ++t) {
      if (t > 0) {
        others[t] += others[t - 1];
        group_live[t] += group_live[t - 1];
      }
      crowded[t] = others[t] + std::min(group_live[t], chain_count) * slot > goal;
    }
    removed = false;
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      if (!in_group[i]) continue;
      const std::size_t end = time.of(buffers[i].upper);
      for (std::size_t t = time.of(buffers[i].lower); t < end; ++t) {
        if (crowded[t]) {
          in_group[i] = false;
          removed = true;
          break;
        }
      }
    }
  }
  chain_count_ = chain_count;
  slot_ = slot;
  in_group_ = std::move(in_group);
  others_ = std::move(others);
}

std::vector<std::int64_t> chain_slots::offsets(std::int64_t start, bool spares_under_goal) const {
  const std::vector<buffer>& buffers = inst_.buffers;
  std::vector<std::int64_t> offsets(buffers.size(), -1);
  if (chain_count_ == 0) return offsets;
  const sections& time = time_;
  const std::vector<std::int64_t>& points = time.points;
  const std::int64_t goal = goal_;
  const std::int64_t chain_count = chain_count_;
  const std::int64_t slot = slot_;
  // The group's buffers born before `start` are left to best fit as well.
  std::vector<std::size_t> members;
  std::vector<std::int64_t> left_out(points.size() + 1, 0);
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    if (!in_group_[i]) continue;
    if (buffers[i].lower >= start) {
      members.push_back(i);
    } else {
      left_out[time.of(buffers[i].lower)] += buffers[i].size;
      left_out[time.of(buffers[i].upper)] -= buffers[i].size;
    }
  }
  if (members.empty()) return offsets;
  // Where the other buffers and the chains' slots leave room for k more slots, up to
  // k copies may use the spares.
  std::vector<std::int64_t> spare_room(points.size(), 0);  // spares usable per section
  for (std::size_t t = 0; t < points.size(); ++t) {
    if (t > 0) left_out[t] += left_out[t - 1];
    const std::int64_t room = goal - others_[t] - left_out[t] - chain_count * slot;
    spare_room[t] = std::clamp<std::int64_t>(room / slot, 0, kSpareSlots);
  }

  // Sweep through time: wherever more of the group's buffers live than there are
  // chain slots, one of them goes to the spares: of those whose whole life has room
  // for one more spare, the one living longest (it covers the most of the moments to
  // come that would need one too, as in covering points with intervals).
  std::sort(members.begin(), members.end(), [&](std::size_t a, std::size_t b) {
    return std::tie(buffers[a].lower, a) < std::tie(buffers[b].lower, b);
  });
  std::vector<bool> spare(buffers.size(), false);
  std::vector<std::int64_t> spares_used(points.size(), 0);
  std::vector<std::size_t> live;
  std::size_t next_member = 0;
  for (std::size_t s = 0; s < points.size(); ++s) {
    const std::int64_t now = points[s];
    live.erase(std::remove_if(live.begin(), live.end(),
                              [&](std::size_t i) { return buffers[i].upper <= now; }),
               live.end());
    while (next_member < members.size() && buffers[members[next_member]].lower == now) {
      live.push_back(members[next_member++]);
    }
    std::int64_t in_chain_slots = 0;
    for (const std::size_t i : live) in_chain_slots += spare[i] ? 0 : 1;
    while (in_chain_slots > chain_count) {
      std::size_t chosen = buffers.size();
      for (const std::size_t i : live) {
        if (spare[i] || (chosen < buffers.size() && buffers[i].upper <= buffers[chosen].upper))
          continue;
        bool fits = true;
        const std::size_t end = time.of(buffers[i].upper);
        for (std::size_t t = time.of(buffers[i].lower); t < end && fits; ++t) {
          fits = spares_used[t] < spare_room[t];
        }
        if (fits) chosen = i;
      }
      if (chosen == buffers.size()) return std::vector<std::int64_t>(buffers.size(), -1);
      spare[chosen] = true;
      const std::size_t end = time.of(buffers[chosen].upper);
      for (std::size_t t = time.of(buffers[chosen].lower); t < end; ++t) ++spares_used[t];
      --in_chain_slots;
    }
  }

  // Slots by birth: each buffer takes the lowest slot of its kind free at its birth.
  // At most chain_count buffers live in the chains' slots at once, and at most
  // kSpareSlots in the spares, so one is always free.
  std::vector<std::int64_t> slot_free_from(static_cast<std::size_t>(chain_count + kSpareSlots),
                                           std::numeric_limits<std::int64_t>::min());
  for (const std::size_t i : members) {
    const std::size_t first = spare[i] ? static_cast<std::size_t>(chain_count) : 0;
    const std::size_t end =
        spare[i] ? slot_free_from.size() : static_cast<std::size_t>(chain_count);
    std::size_t k = first;
    while (k < end && slot_free_from[k] > buffers[i].lower) ++k;
    if (k == end) return std::vector<std::int64_t>(buffers.size(), -1);  // not expected
    slot_free_from[k] = buffers[i].upper;
    // The spares lie right above the chains' slots, or just under the goal, where
    // best fit lays the large transients of the peaks when the slots are full.
    const std::int64_t spare_base = spares_under_goal
                                        ? std::max(goal - kSpareSlots * slot, chain_count * slot)
                                        : chain_count * slot;
    offsets[i] = spare[i] ? spare_base + (static_cast<std::int64_t>(k) - chain_count) * slot
                          : static_cast<std::int64_t>(k) * slot;
  }
  return offsets;
}

}  // namespace memkit::planner::detail

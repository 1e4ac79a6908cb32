// The greedy floor and the search: valid plans, optimal on instances small enough to
// check exhaustively, capacity handling, and one challenging instance.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <climits>
#include <cstdint>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "memkit/planner.hpp"
#include "planner/search.hpp"

namespace memkit::planner {
namespace {

instance random_instance(std::mt19937& rng, int count, int horizon, int max_size) {
  instance inst;
  std::uniform_int_distribution<int> time(0, horizon - 1);
  std::uniform_int_distribution<int> size(1, max_size);
  for (int i = 0; i < count; ++i) {
    int a = time(rng);
    int b = time(rng);
    if (a > b) std::swap(a, b);
    inst.buffers.push_back(buffer{i, a, b + 1, size(rng)});
  }
  return inst;
}

bool overlaps_in_time(const buffer& a, const buffer& b) {
  return a.lower < b.upper && b.lower < a.upper;
}

// Tries every offset of every buffer below `limit`; fine for a handful of buffers.
bool fits_exhaustively(const instance& inst, std::int64_t limit, std::vector<std::int64_t>& offsets,
                       std::size_t next) {
  if (next == inst.buffers.size()) return true;
  const buffer& b = inst.buffers[next];
  for (std::int64_t offset = 0; offset + b.size <= limit; ++offset) {
    bool clash = false;
    for (std::size_t j = 0; j < next && !clash; ++j) {
      const buffer& other = inst.buffers[j];
      clash = overlaps_in_time(b, other) && offset < offsets[j] + other.size &&
              offsets[j] < offset + b.size;
    }
    if (clash) continue;
    offsets[next] = offset;
    if (fits_exhaustively(inst, limit, offsets, next + 1)) return true;
  }
  return false;
}

std::int64_t exhaustive_optimum(const instance& inst) {
  std::vector<std::int64_t> offsets(inst.buffers.size());
  for (std::int64_t limit = load(inst);; ++limit) {
    if (fits_exhaustively(inst, limit, offsets, 0)) return limit;
  }
}

TEST(PlannerGreedy, PlansAreValidOnRandomInstances) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const instance inst = random_instance(rng, 1 + trial % 40, 30, 100);
    const plan p = greedy_best_fit(inst);
    const validation check = validate(inst, p);
    ASSERT_TRUE(check.ok) << check.message;
    EXPECT_GE(height(inst, p), load(inst));
  }
}

// Best fit by decreasing size, scanning every placed buffer: what greedy_best_fit()
// computes, however it finds the buffers near in time.
plan reference_best_fit(const instance& inst) {
  std::vector<std::size_t> order(inst.buffers.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  const std::vector<buffer>& b = inst.buffers;
  std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    if (b[x].size != b[y].size) return b[x].size > b[y].size;
    if (b[x].upper - b[x].lower != b[y].upper - b[y].lower) {
      return b[x].upper - b[x].lower > b[y].upper - b[y].lower;
    }
    return x < y;
  });
  plan p;
  p.offsets.assign(b.size(), 0);
  std::vector<std::size_t> placed;  // by offset
  for (const std::size_t i : order) {
    std::int64_t reach = 0;
    std::int64_t best = -1;
    std::int64_t best_gap = INT64_MAX;
    for (const std::size_t j : placed) {
      if (!overlaps_in_time(b[i], b[j])) continue;
      const std::int64_t gap = p.offsets[j] - reach;
      if (gap >= b[i].size && gap < best_gap) {
        best_gap = gap;
        best = reach;
      }
      reach = std::max(reach, p.offsets[j] + b[j].size);
    }
    p.offsets[i] = best >= 0 ? best : reach;
    placed.insert(std::upper_bound(placed.begin(), placed.end(), p.offsets[i],
                                   [&](std::int64_t v, std::size_t j) { return v < p.offsets[j]; }),
                  i);
  }
  return p;
}

TEST(PlannerGreedy, LongSchedulesGetTheSamePlanAsScanningEveryBuffer) {
  // Short lifetimes over a long time axis, plus a few long-lived buffers: best fit
  // then looks only at buffers near in time, and must place exactly as before.
  std::mt19937 rng(41);
  for (int trial = 0; trial < 5; ++trial) {
    instance inst;
    std::uniform_int_distribution<int> start(0, 200000);
    std::uniform_int_distribution<int> length(1, 60);
    std::uniform_int_distribution<int> size(1, 50);
    for (int i = 0; i < 4000; ++i) {
      const int a = start(rng);
      const int b = i % 200 == 0 ? a + 100000 : a + length(rng);
      inst.buffers.push_back(buffer{i, a, b, size(rng) * 8});
    }
    const plan p = greedy_best_fit(inst);
    ASSERT_TRUE(validate(inst, p).ok);
    EXPECT_EQ(p.offsets, reference_best_fit(inst).offsets) << "trial " << trial;
  }
}

TEST(PlannerGreedy, FillsTheBestGap) {
  // Two long buffers leave a gap of 4 under a third; the size-4 buffer takes it exactly.
  instance inst;
  inst.buffers = {{0, 0, 10, 8}, {1, 0, 5, 4}, {2, 5, 10, 6}, {3, 6, 9, 4}};
  const plan p = greedy_best_fit(inst);
  ASSERT_TRUE(validate(inst, p).ok);
  EXPECT_EQ(height(inst, p), 18);
}

TEST(PlannerSearch, ReachesTheExhaustiveOptimumOnTinyInstances) {
  std::mt19937 rng(11);
  int greedy_missed = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const instance inst = random_instance(rng, 4 + trial % 5, 5, 7);
    const std::int64_t optimum = exhaustive_optimum(inst);
    options opts;
    opts.time_limit_seconds = 5.0;
    const result res = solve(inst, opts);
    if (res.greedy_height_bytes > optimum) ++greedy_missed;
    const validation check = validate(inst, res.best);
    ASSERT_TRUE(check.ok) << check.message;
    ASSERT_EQ(res.height_bytes, optimum) << "trial " << trial;
    EXPECT_TRUE(res.optimal) << "trial " << trial;
  }
  // The comparison means something only if the greedy floor is not already optimal.
  EXPECT_GT(greedy_missed, 5);
}

TEST(PlannerSearch, ReachesTheExhaustiveOptimumOnLongerSchedules) {
  // A longer time axis lets the search split off groups of buffers that share no
  // moment once the buffers between them are placed; the optimum must survive it.
  std::mt19937 rng(23);
  for (int trial = 0; trial < 200; ++trial) {
    const instance inst = random_instance(rng, 6 + trial % 2, 12, 6);
    const std::int64_t optimum = exhaustive_optimum(inst);
    options opts;
    opts.time_limit_seconds = 5.0;
    const result res = solve(inst, opts);
    ASSERT_TRUE(validate(inst, res.best).ok);
    ASSERT_EQ(res.height_bytes, optimum) << "trial " << trial;
    EXPECT_TRUE(res.optimal) << "trial " << trial;
  }
}

TEST(PlannerSearch, ReachesTheOptimumWithinACapacity) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 100; ++trial) {
    const instance inst = random_instance(rng, 7, 5, 7);
    const std::int64_t optimum = exhaustive_optimum(inst);
    options opts;
    opts.time_limit_seconds = 5.0;
    opts.capacity = optimum;
    const result at = solve(inst, opts);
    EXPECT_TRUE(at.fits);
    EXPECT_TRUE(validate(inst, at.best, optimum).ok);
    opts.capacity = optimum - 1;  // below LOAD here: cannot fit
    const result below = solve(inst, opts);
    EXPECT_FALSE(below.fits);
    EXPECT_TRUE(validate(inst, below.best).ok);  // still the best valid plan found
  }
}

TEST(PlannerSearch, PlansAreValidAndNoWorseThanGreedyOnRandomInstances) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 40; ++trial) {
    const instance inst = random_instance(rng, 20 + trial * 5, 60, 1000);
    options opts;
    opts.time_limit_seconds = 0.05;
    const result res = solve(inst, opts);
    const validation check = validate(inst, res.best);
    ASSERT_TRUE(check.ok) << check.message;
    EXPECT_LE(res.height_bytes, res.greedy_height_bytes);
    EXPECT_GE(res.height_bytes, res.load_bytes);
    EXPECT_EQ(res.load_bytes, load(inst));
  }
}

TEST(PlannerSearch, SplitsAtCutPointsAndStacksFullSpanBuffers) {
  // Two independent halves, each under a buffer live over all of it.
  instance inst;
  inst.buffers = {{0, 0, 10, 5}, {1, 0, 4, 3}, {2, 4, 10, 2}, {3, 10, 20, 7}, {4, 12, 15, 1}};
  const result res = solve(inst, options{});
  ASSERT_TRUE(validate(inst, res.best).ok);
  EXPECT_EQ(res.height_bytes, 8);
  EXPECT_TRUE(res.optimal);
}

// A buffer live over most of the schedule but not all of it goes to the bottom when
// the bytes live where it is dead leave room for it under LOAD; the rest then splits
// where only it crossed. Here a buffer born after the first step and living to the
// end holds three steps in one part unless it is stacked.
TEST(PlannerSearch, StacksALongLivedBufferWhereItCostsNothing) {
  instance inst;
  inst.buffers = {{0, 0, 2, 4},                   // before the long-lived one: 4 live
                  {1, 1, 30, 6},                  // long-lived
                  {2, 2, 10, 3},  {3, 5, 10, 4},  // step 1: 6 + 7 at most
                  {4, 10, 20, 7},                 // step 2: 6 + 7
                  {5, 20, 25, 5}, {6, 22, 30, 2}};
  const detail::decomposition split = detail::decompose(inst);
  EXPECT_EQ(split.fixed_offsets[1], 0) << "the long-lived buffer sits at the bottom";
  for (const detail::part& p : split.parts) {
    for (const std::size_t i : p.members) {
      EXPECT_EQ(inst.buffers[i].lower / 10, inst.buffers[p.members[0]].lower / 10)
          << "a part holds one step: the steps split once the buffer is stacked";
    }
  }
  const result res = solve(inst, options{});
  ASSERT_TRUE(validate(inst, res.best).ok);
  EXPECT_EQ(res.height_bytes, res.load_bytes);
  EXPECT_EQ(res.load_bytes, 13);

  // Where the bytes live before it leave no room under LOAD (17 at moment 0, LOAD 18
  // at moment 1), it stays.
  inst.buffers[0].size = 12;
  inst.buffers.push_back({7, 0, 1, 5});
  EXPECT_EQ(load(inst), 18);
  EXPECT_EQ(detail::decompose(inst).fixed_offsets[1], -1);
}

// A loop whose every step hands a one-byte buffer to the next is one group from the
// first step to the last, and the bottom stack cannot take the handed buffers (each is
// dead at the other steps' peaks, which reach LOAD). Past 4096 buffers they are cut
// out into a band one byte high at the bottom, and the loop falls apart into steps.
TEST(PlannerSearch, CutsAChainedLoopWhereOnlyABandOfBytesCrosses) {
  std::mt19937 rng(5);
  const instance step = random_instance(rng, 260, 100, 1000);
  constexpr int kSteps = 40;
  std::vector<std::size_t> handed;
  const auto chained_loop = [&](std::int64_t handed_size) {
    instance inst;
    handed.clear();
    for (int k = 0; k < kSteps; ++k) {
      for (const buffer& b : step.buffers) {
        inst.buffers.push_back(buffer{static_cast<std::int64_t>(inst.buffers.size()),
                                      k * 100 + b.lower, k * 100 + b.upper, b.size});
      }
      if (k + 1 < kSteps) {  // from the middle of step k to the middle of step k + 1
        handed.push_back(inst.buffers.size());
        inst.buffers.push_back(buffer{static_cast<std::int64_t>(inst.buffers.size()), k * 100 + 50,
                                      k * 100 + 150, handed_size});
      }
    }
    return inst;
  };
  const instance inst = chained_loop(1);
  ASSERT_GT(inst.buffers.size(), detail::kBandMinBuffers);
  EXPECT_EQ(detail::decompose(inst).parts.size(), 1u) << "without bands the loop is one part";
  const detail::decomposition split = detail::decompose(inst, true);
  EXPECT_EQ(split.parts.size(), static_cast<std::size_t>(kSteps));
  for (const std::size_t i : handed) {
    EXPECT_EQ(split.fixed_offsets[i], 0) << "a handed buffer sits in the band";
  }
  for (const detail::part& p : split.parts) {
    EXPECT_GE(p.base, 1) << "the steps rest on the band";
    for (const std::size_t i : p.members) {
      ASSERT_EQ(inst.buffers[i].lower / 100, inst.buffers[p.members[0]].lower / 100)
          << "a part holds one step";
    }
  }
  options opts;
  opts.time_limit_seconds = 2;
  const result res = solve(inst, opts);
  ASSERT_TRUE(validate(inst, res.best).ok);
  EXPECT_EQ(res.parts, static_cast<std::size_t>(kSteps));

  // A handed buffer that makes the band cost more than 1/4096 of LOAD is no band: it
  // rests under the two steps it reaches into (see the next test).
  const instance heavy = chained_loop(load(inst) / 1000);
  const detail::decomposition heavy_split = detail::decompose(heavy, true);
  EXPECT_EQ(heavy_split.parts.size(), static_cast<std::size_t>(kSteps));
  for (const detail::part& p : heavy_split.parts) {
    EXPECT_EQ(p.base, 0) << "no band under the steps";
    EXPECT_FALSE(p.resting.empty());
  }
}

// A loop whose steps each hand a buffer too large for a band to the next, living 1.7
// steps (unet_bf16's 6 MiB buffer born after each step's peak): consecutive ones
// overlap, so a band of them would be two high. The loop is cut before every other
// step, where the buffers crossing were born after those of the cut before died; they
// rest at the bottom only where they live, and each pair of steps is planned above
// them, at LOAD.
TEST(PlannerSearch, CutsAChainedLoopAboveTheBuffersItHandsOn) {
  std::mt19937 rng(1);
  const instance step = random_instance(rng, 200, 100, 1000);
  const std::int64_t step_load = load(step);
  constexpr int kSteps = 40;
  instance inst;
  std::vector<std::size_t> handed;
  const auto add = [&](std::int64_t lower, std::int64_t upper, std::int64_t size) {
    inst.buffers.push_back(
        buffer{static_cast<std::int64_t>(inst.buffers.size()), lower, upper, size});
  };
  for (int k = 0; k < kSteps; ++k) {
    for (const buffer& b : step.buffers) add(k * 100 + b.lower, k * 100 + b.upper, b.size);
    if (k + 1 < kSteps) {
      handed.push_back(inst.buffers.size());
      add(k * 100 + 50, k * 100 + 190, step_load / 400);
    }
  }
  ASSERT_GT(inst.buffers.size(), detail::kBandMinBuffers);
  const detail::decomposition split = detail::decompose(inst, true);
  // Cut at 100 (the first handed buffer crossing), 300, ..., 3900: the first step and
  // the last alone, the rest two by two.
  EXPECT_EQ(split.parts.size(), static_cast<std::size_t>(kSteps / 2 + 1));
  std::size_t resting = 0;
  for (const std::size_t i : handed) {
    if (split.fixed_offsets[i] < 0) continue;
    EXPECT_EQ(split.fixed_offsets[i], 0) << "a resting buffer sits at the bottom";
    ++resting;
  }
  EXPECT_EQ(resting, (handed.size() + 1) / 2) << "every other handed buffer rests";
  for (const detail::part& p : split.parts) {
    EXPECT_EQ(p.base, 0);
    for (const std::size_t i : p.members) {
      ASSERT_EQ((inst.buffers[i].lower + 100) / 200, (inst.buffers[p.members[0]].lower + 100) / 200)
          << "a part holds two steps";
    }
  }
  options opts;
  opts.time_limit_seconds = 4;
  const result res = solve(inst, opts);
  ASSERT_TRUE(validate(inst, res.best).ok);
  EXPECT_EQ(res.height_bytes, res.load_bytes) << "whole, 1.035 x LOAD in as long";
}

// A band costs bytes where its buffers are dead and the rest reaches LOAD (here the
// first step, which no buffer is handed into): a loop that best fit brings to LOAD
// whole is planned whole, and cut into bands only when that fails.
TEST(PlannerSearch, PlansALoopWholeWhereABandWouldKeepItAboveLoad) {
  constexpr std::int64_t kLarge = std::int64_t{10} << 20;
  constexpr int kSteps = 3400;
  instance inst;
  const auto add = [&](std::int64_t lower, std::int64_t upper, std::int64_t size) {
    inst.buffers.push_back(
        buffer{static_cast<std::int64_t>(inst.buffers.size()), lower, upper, size});
  };
  for (int k = 0; k < kSteps; ++k) {
    add(k * 100, k * 100 + 40, k == 0 ? kLarge + 1 : kLarge);  // the step's peak
    add(k * 100 + 40, k * 100 + 100, kLarge / 2);
    if (k + 1 < kSteps) add(k * 100 + 50, k * 100 + 150, 1);  // handed to the next step
  }
  ASSERT_GT(inst.buffers.size(), detail::kBandMinBuffers);
  EXPECT_EQ(load(inst), kLarge + 1);
  const std::size_t handed = 2;  // the first buffer handed on
  EXPECT_EQ(detail::decompose(inst).parts.size(), 1u);
  EXPECT_EQ(detail::decompose(inst).fixed_offsets[handed], -1);
  EXPECT_EQ(detail::decompose(inst, true).fixed_offsets[handed], 0) << "a band would take it";
  options opts;
  opts.time_limit_seconds = 4;
  const result res = solve(inst, opts);
  ASSERT_TRUE(validate(inst, res.best).ok);
  EXPECT_EQ(res.height_bytes, res.load_bytes) << "planned whole, at LOAD";
}

// A long schedule of identical steps under a lasting buffer: planned part by part,
// each step's shape once, at LOAD.
TEST(PlannerSearch, PlansARepeatedLoopStepByStep) {
  std::mt19937 rng(11);
  const instance step = random_instance(rng, 600, 100, 1000);
  instance inst;
  inst.buffers.push_back(buffer{0, 0, 30 * 100 + 1, 500});  // lives through every step
  for (int k = 0; k < 30; ++k) {
    for (const buffer& b : step.buffers) {
      inst.buffers.push_back(buffer{static_cast<std::int64_t>(inst.buffers.size()),
                                    1 + k * 100 + b.lower, 1 + k * 100 + b.upper, b.size});
    }
  }
  options opts;
  opts.time_limit_seconds = 2;
  const result res = solve(inst, opts);
  ASSERT_TRUE(validate(inst, res.best).ok);
  EXPECT_EQ(res.parts, 30u);
  EXPECT_EQ(res.best.offsets[0], 0);
  for (int k = 1; k < 30; ++k) {
    for (std::size_t j = 1; j <= step.buffers.size(); ++j) {
      ASSERT_EQ(res.best.offsets[k * step.buffers.size() + j], res.best.offsets[j])
          << "step " << k << " is planned as the first";
    }
  }
  EXPECT_LE(res.height_bytes, 500 + height(step, greedy_best_fit(step)));
}

TEST(PlannerSearch, EmptyInstance) {
  const result res = solve(instance{}, options{});
  EXPECT_EQ(res.height_bytes, 0);
  EXPECT_TRUE(res.best.offsets.empty());
  EXPECT_TRUE(res.fits);
}

// With no time at all the first pass stacks what it has not placed: still a valid
// plan, and no search (whose setup alone grows with the instance).
TEST(PlannerSearch, NoTimeGivesAValidPlanWithoutSearch) {
  std::mt19937 rng(7);
  const instance inst = random_instance(rng, 3000, 200, 1000);
  options opts;
  opts.time_limit_seconds = 0;
  const result res = solve(inst, opts);
  EXPECT_TRUE(validate(inst, res.best));
  EXPECT_EQ(res.nodes, 0u);
  EXPECT_GE(res.height_bytes, res.load_bytes);
  EXPECT_EQ(res.height_bytes, height(inst, res.best));
  // Not a stack of what best fit had no time for: at most the online floor.
  EXPECT_LE(res.height_bytes, height(inst, detail::online_best_fit(inst)));
  EXPECT_LT(res.height_bytes, 2 * res.load_bytes);
}

// Best fit run online over the schedule: valid on any instance, and on a loop that
// frees everything between steps, each step starts from the bottom again.
TEST(PlannerSearch, TheOnlineFloorIsValidAndReusesFreedRanges) {
  std::mt19937 rng(13);
  for (int trial = 0; trial < 50; ++trial) {
    const instance inst = random_instance(rng, 10 + trial * 20, 40 + trial, 1000);
    const plan online = detail::online_best_fit(inst);
    const validation check = validate(inst, online);
    ASSERT_TRUE(check.ok) << check.message;
    EXPECT_GE(height(inst, online), load(inst));
  }
  instance steps;
  for (int k = 0; k < 10; ++k) {
    for (int j = 0; j < 5; ++j)
      steps.buffers.push_back(buffer{k * 5 + j, k * 10 + j, k * 10 + 9, 100 * (j + 1)});
  }
  EXPECT_EQ(height(steps, detail::online_best_fit(steps)), load(steps));
}

// A serving loop's shape: chains of buffers, each born a moment before the one before
// it dies and one unit larger (a request's cache grown token by token), requests
// leaving and new ones joining, with short transients between. No moment is free of
// crossing chains, so the instance is one group.
instance serving_instance(std::mt19937& rng, int requests, int slots) {
  instance inst;
  std::uniform_int_distribution<int> length(5, 60);
  std::uniform_int_distribution<int> prompt(8, 64);
  std::vector<int> free_at(static_cast<std::size_t>(slots), 0);
  int id = 0;
  for (int r = 0; r < requests; ++r) {
    auto slot = std::min_element(free_at.begin(), free_at.end());
    int t = *slot;
    std::int64_t size = prompt(rng);
    for (int token = length(rng); token > 0; --token, ++size, t += 3) {
      inst.buffers.push_back(buffer{id++, t, t + 4, size});          // the cache, then its copy
      inst.buffers.push_back(buffer{id++, t + 1, t + 2, 2 * size});  // a transient
    }
    *slot = t + 1;
  }
  return inst;
}

TEST(PlannerGreedy, TheRollingHorizonPlansOneGroupWindowByWindow) {
  std::mt19937 rng(21);
  const instance inst = serving_instance(rng, 400, 12);
  ASSERT_GT(inst.buffers.size(), 10000u);
  ASSERT_EQ(detail::decompose(inst).parts.size(), 1u) << "chains cross every moment";
  const auto forever = detail::clock::time_point::max();
  for (const std::size_t window : {std::size_t{1}, std::size_t{500}, std::size_t{4000}}) {
    const plan p = detail::rolling_horizon(inst, window, forever);
    const validation check = validate(inst, p);
    ASSERT_TRUE(check.ok) << "window " << window << ": " << check.message;
    EXPECT_GE(height(inst, p), load(inst));
  }
  // One window holding everything is best fit in its best order, then repaired: never
  // above best fit in size order, one of those orders.
  const plan whole = detail::rolling_horizon(inst, inst.buffers.size(), forever);
  EXPECT_LE(height(inst, whole), height(inst, greedy_best_fit(inst)));
  // Past the deadline the windows are stacked: still valid.
  const plan late = detail::rolling_horizon(inst, 500, detail::clock::now());
  EXPECT_TRUE(validate(inst, late));
}

TEST(PlannerGreedy, APlanCarriedToASiblingKeepsWhatStillFitsAndPlacesTheRest) {
  instance from;
  from.buffers = {{0, 0, 4, 10}, {1, 0, 2, 5}, {2, 2, 4, 5}, {3, 1, 3, 3}};
  const std::vector<std::int64_t> from_offsets{0, 10, 10, 15};
  ASSERT_TRUE(validate(from, plan{from_offsets}));
  // The same lifetimes: buffer 1 grew (at 10 it would meet buffer 3), buffer 2 shrank,
  // and a floor buffer lies where buffer 3 was.
  instance to;
  to.buffers = {{0, 0, 4, 10}, {1, 0, 2, 7}, {2, 2, 4, 4}, {3, 1, 3, 3}, {4, 2, 3, 3}};
  const std::vector<std::int64_t> fixed{-1, -1, -1, -1, 16};
  std::vector<std::int64_t> offsets;
  const std::int64_t h =
      detail::carry_plan(from, from_offsets, to, fixed, detail::clock::time_point::max(), offsets);
  ASSERT_EQ(offsets.size(), 4u);
  EXPECT_EQ(offsets[0], 0);
  EXPECT_EQ(offsets[2], 10);
  plan whole{offsets};
  whole.offsets.push_back(16);
  const validation check = validate(to, whole);
  ASSERT_TRUE(check.ok) << check.message;
  EXPECT_EQ(h, height(to, whole));
}

// Steps with the same lifetimes, drawn from two buckets whose sizes differ in a few
// buffers: the second bucket's parts are siblings of the first's and take its plan.
TEST(PlannerSearch, StepsOfTwoBucketsArePlannedValidlyFromOneSearch) {
  instance inst;
  std::int64_t id = 0;
  for (int step = 0; step < 40; ++step) {
    const std::int64_t base = step * 100;
    const bool second_bucket = step % 3 == 1;
    for (int j = 0; j < 300; ++j) {
      const std::int64_t lower = base + (j * 7) % 90;
      const std::int64_t upper = lower + 1 + (j * 13) % 9;
      std::int64_t size = 100 + (j * 37) % 500;
      if (second_bucket && j % 50 == 0) size += 64;  // grown: placed again
      if (second_bucket && j % 50 == 1) size -= 50;  // shrunk: keeps its place
      inst.buffers.push_back(buffer{id++, lower, upper, size});
    }
  }
  ASSERT_GT(detail::decompose(inst).parts.size(), 1u);
  options opts;
  opts.time_limit_seconds = 2.0;
  const result r = solve(inst, opts);
  const validation check = validate(inst, r.best);
  ASSERT_TRUE(check.ok) << check.message;
  EXPECT_GE(r.height_bytes, load(inst));
  EXPECT_EQ(r.height_bytes, height(inst, r.best));
  EXPECT_LE(r.height_bytes, height(inst, greedy_best_fit(inst)));
}

TEST(PlannerGreedy, WindowsAroundTheTopLowerAPlanAndLeaveFixedBuffersWhereTheyAre) {
  std::mt19937 rng(5);
  instance inst;
  std::uniform_int_distribution<int> length(1, 40);
  std::uniform_int_distribution<int> size(1, 1000);
  for (int i = 0; i < 4000; ++i) {
    const int lower = i / 2;
    inst.buffers.push_back(buffer{i, lower, lower + length(rng), size(rng)});
  }
  // A poor start: every buffer stacked on the ones before it.
  plan stacked;
  std::int64_t top = 0;
  for (const buffer& b : inst.buffers) {
    stacked.offsets.push_back(top);
    top += b.size;
  }
  std::vector<std::int64_t> fixed(inst.buffers.size(), -1);
  for (std::size_t i = 0; i < fixed.size(); i += 7) fixed[i] = stacked.offsets[i];
  const auto deadline = detail::clock::now() + std::chrono::seconds(1);
  const plan p = detail::improve_by_windows(inst, stacked, load(inst), deadline, &fixed);
  const validation check = validate(inst, p);
  ASSERT_TRUE(check.ok) << check.message;
  EXPECT_LT(height(inst, p), height(inst, stacked));
  for (std::size_t i = 0; i < fixed.size(); i += 7) ASSERT_EQ(p.offsets[i], fixed[i]);
  // Without fixed buffers, and from best fit: never higher than where it started.
  const plan fit = greedy_best_fit(inst);
  const plan better = detail::improve_by_windows(inst, fit, load(inst),
                                                 detail::clock::now() + std::chrono::seconds(1));
  ASSERT_TRUE(validate(inst, better));
  EXPECT_LE(height(inst, better), height(inst, fit));
  EXPECT_GE(height(inst, better), load(inst));
}

TEST(PlannerGreedy, SizeClassSweepTakesLargerClassesFirstThenTheLatestDeath) {
  std::mt19937 rng(17);
  const instance inst = random_instance(rng, 500, 100, 5000);
  const std::vector<std::size_t> order = detail::size_class_sweep_order(inst);
  ASSERT_EQ(order.size(), inst.buffers.size());
  const auto size_class = [&](std::size_t i) {
    return std::bit_width(static_cast<std::uint64_t>(inst.buffers[i].size));
  };
  for (std::size_t k = 1; k < order.size(); ++k) {
    const std::size_t a = order[k - 1];
    const std::size_t b = order[k];
    ASSERT_GE(size_class(a), size_class(b));
    if (size_class(a) == size_class(b)) {
      ASSERT_GE(inst.buffers[a].upper, inst.buffers[b].upper);
    }
  }
  // Within a class, sizes do not matter: 3 and 2 share one, 4 is larger.
  instance three;
  three.buffers = {{0, 0, 5, 3}, {1, 0, 9, 2}, {2, 0, 1, 4}};
  EXPECT_EQ(detail::size_class_sweep_order(three), (std::vector<std::size_t>{2, 1, 0}));
}

// The climb keeps only orders whose best fit lands no higher: it never returns a
// plan above its start, and on random schedules it finds lower ones. The order it
// leaves gives the plan it returns. Counted in rounds, with the deadline far off, so
// that a slow build (sanitizers) does the same work as a fast one (64 rounds: each of
// the three schedules was lowered within 50 on 2026-12-03).
TEST(PlannerGreedy, TheClimbNeverRaisesAPlanAndLowersRandomOnes) {
  std::mt19937 rng(3);
  const auto far_off = detail::clock::now() + std::chrono::hours(1);
  for (int trial = 0; trial < 3; ++trial) {
    const instance inst = random_instance(rng, 2000, 400, 1000);
    std::vector<std::size_t> order = detail::peak_first_order(inst);
    const plan start = detail::greedy_in_order(inst, order);
    const plan climbed = detail::climb_order(inst, order, start, load(inst), far_off, nullptr, 64);
    const validation check = validate(inst, climbed);
    ASSERT_TRUE(check.ok) << check.message;
    EXPECT_LT(height(inst, climbed), height(inst, start));
    EXPECT_EQ(height(inst, detail::greedy_in_order(inst, order)), height(inst, climbed));
    // Climbing on from there never raises it.
    std::vector<std::size_t> again = order;
    const plan next = detail::climb_order(inst, again, climbed, load(inst), far_off, nullptr, 8);
    EXPECT_LE(height(inst, next), height(inst, climbed));
    std::vector<std::size_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t k = 0; k < sorted.size(); ++k) ASSERT_EQ(sorted[k], k);
  }
  // At the goal already: nothing to do.
  const instance inst = random_instance(rng, 50, 20, 100);
  std::vector<std::size_t> order = detail::size_order(inst);
  const plan start = detail::greedy_in_order(inst, order);
  const plan same = detail::climb_order(inst, order, start, height(inst, start),
                                        detail::clock::now() + std::chrono::seconds(10));
  EXPECT_EQ(same.offsets, start.offsets);
}

// A generate loop with beam search, in small: each token copies the chains' buffers
// one by one (each copy overlaps its original by one event), then copies them again
// one token larger, and a large transient lives at the token's peak. The chains get
// slots as high as their largest buffer, the copies that cannot fit beside them go to
// the spares, which are free at every peak, and best fit lays the transient over them.
TEST(PlannerGreedy, ChainSlotsKeepTheSparesFreeAtThePeaks) {
  constexpr std::int64_t kChains = 6;
  constexpr std::int64_t kTokens = 12;
  constexpr std::int64_t kFirstSize = 1000;
  constexpr std::int64_t kGrowth = 10;
  constexpr std::int64_t kTransient = 3000;
  instance inst;
  std::vector<std::size_t> chain_buffers;
  std::vector<std::int64_t> peaks;
  std::vector<std::int64_t> live_until(kChains, -1);  // the index of each chain's last buffer
  std::int64_t id = 0;
  const auto add = [&](std::int64_t lower, std::int64_t upper, std::int64_t size) {
    inst.buffers.push_back(buffer{id++, lower, upper, size});
    return inst.buffers.size() - 1;
  };
  std::int64_t now = 0;
  std::int64_t size = kFirstSize;
  for (std::int64_t c = 0; c < kChains; ++c) {
    live_until[c] = static_cast<std::int64_t>(add(now, 0, size));  // upper set by its copy
    chain_buffers.push_back(inst.buffers.size() - 1);
    now += 2;
  }
  for (std::int64_t token = 0; token < kTokens; ++token) {
    for (int grow = 0; grow < 2; ++grow) {  // the reorder copy, then the grown one
      if (grow == 1) size += kGrowth;
      for (std::int64_t c = 0; c < kChains; ++c) {
        const std::size_t copy = add(now, 0, size);
        inst.buffers[static_cast<std::size_t>(live_until[c])].upper = now + 1;
        live_until[c] = static_cast<std::int64_t>(copy);
        chain_buffers.push_back(copy);
        now += 2;
      }
      now += 5;
    }
    peaks.push_back(now);
    add(now, now + 3, kTransient);
    add(now - 20, now + 10, 8);  // a small buffer around the peak
    now += 10;
  }
  for (std::int64_t c = 0; c < kChains; ++c) {
    inst.buffers[static_cast<std::size_t>(live_until[c])].upper = now;
  }
  const std::int64_t goal = load(inst);
  ASSERT_EQ(goal, kChains * size + kTransient + 8);

  const std::vector<std::int64_t> fixed = detail::chain_slots(inst, goal).offsets(0, false);
  for (const std::size_t i : chain_buffers) {
    ASSERT_GE(fixed[i], 0) << "buffer " << i;
    EXPECT_EQ(fixed[i] % size, 0) << "buffer " << i;  // slots as high as the largest
  }
  for (std::size_t i = 0; i < inst.buffers.size(); ++i) {
    if (inst.buffers[i].size == kTransient) {
      EXPECT_LT(fixed[i], 0);
    }
  }
  for (const std::int64_t peak : peaks) {
    for (const std::size_t i : chain_buffers) {
      if (inst.buffers[i].lower <= peak && peak < inst.buffers[i].upper) {
        EXPECT_LT(fixed[i], kChains * size) << "a spare is taken at the peak " << peak;
      }
    }
  }
  std::vector<std::size_t> rest;
  for (const std::size_t i : detail::size_class_sweep_order(inst)) {
    if (fixed[i] < 0) rest.push_back(i);
  }
  const plan p = detail::greedy_in_order(inst, rest, detail::clock::time_point::max(), &fixed);
  const validation check = validate(inst, p);
  ASSERT_TRUE(check.ok) << check.message;
  for (std::size_t i = 0; i < inst.buffers.size(); ++i) {
    if (fixed[i] >= 0) {
      EXPECT_EQ(p.offsets[i], fixed[i]);
    }
  }
  EXPECT_EQ(height(inst, p), goal);

  // The spares under the goal instead: the same plan height.
  const std::vector<std::int64_t> under = detail::chain_slots(inst, goal).offsets(0, true);
  const plan q = detail::greedy_in_order(inst, rest, detail::clock::time_point::max(), &under);
  ASSERT_TRUE(validate(inst, q).ok);
  EXPECT_EQ(height(inst, q), goal);

  // No chains in a random schedule: nothing fixed.
  std::mt19937 rng(5);
  const instance random = random_instance(rng, 2000, 400, 1000);
  const std::vector<std::int64_t> none =
      detail::chain_slots(random, load(random)).offsets(0, false);
  EXPECT_TRUE(std::all_of(none.begin(), none.end(), [](std::int64_t o) { return o < 0; }));
}

// A part where every buffer overlaps every other has n^2 / 2 pairs: past the search's
// bound (2^26 pairs) it is not searched, and costs no adjacency lists.
TEST(PlannerSearch, APartTooDenseIsNotSearched) {
  instance inst;
  for (int i = 0; i < 12000; ++i) inst.buffers.push_back(buffer{i, i % 7, 100000 - i % 5, 1});
  std::vector<std::size_t> members(inst.buffers.size());
  std::iota(members.begin(), members.end(), std::size_t{0});
  detail::part_search dense(inst, members);
  std::vector<std::int64_t> offsets;
  EXPECT_EQ(
      dense.run(dense.part_load() - 1, detail::clock::now() + std::chrono::seconds(5), offsets),
      detail::search_status::infeasible);  // below LOAD: refuted all the same
  EXPECT_EQ(
      dense.run(dense.part_load() * 2, detail::clock::now() + std::chrono::seconds(5), offsets),
      detail::search_status::stopped);
  EXPECT_EQ(dense.nodes(), 0u);
  // A sparse part of the same size is searched. Each node checks every section (0.5 s
  // in all in Release, past 5 s under sanitizers on two cores): the deadline is far.
  for (int i = 0; i < 12000; ++i) inst.buffers[i] = buffer{i, i, i + 3, 1};
  detail::part_search sparse(inst, members);
  EXPECT_EQ(
      sparse.run(sparse.part_load() * 2, detail::clock::now() + std::chrono::seconds(300), offsets),
      detail::search_status::found);
}

TEST(PlannerSearch, SolvesAChallengingInstanceWithinCapacity) {
  const std::string path =
      std::string(MEMKIT_SOURCE_DIR) + "/tests/data/planner/minimalloc-challenging/A.1048576.csv";
  const instance inst = read_instance(path);
  options opts;
  opts.capacity = 1048576;
  opts.time_limit_seconds = 20.0;
  const result res = solve(inst, opts);
  EXPECT_TRUE(res.fits) << "height " << res.height_bytes;
  const validation check = validate(inst, res.best, 1048576);
  EXPECT_TRUE(check.ok) << check.message;
  EXPECT_GT(res.greedy_height_bytes, 1048576);  // greedy alone does not fit
}

TEST(PlannerSearch, FitsEveryChallengingInstanceOfTheSharedFolder) {
  // The whole suite lives beside the repository, not in it.
  const std::filesystem::path folder =
      std::filesystem::path(MEMKIT_SOURCE_DIR) / "../shared/planner/minimalloc-challenging";
  if (!std::filesystem::is_directory(folder)) {
    GTEST_SKIP() << "no " << folder.string() << " here";
  }
  int planned = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (entry.path().extension() != ".csv") continue;
    const instance inst = read_instance(entry.path().string());
    options opts;
    opts.capacity = 1048576;
    opts.time_limit_seconds = 60.0;  // a guard only: each takes well under a second
    const result res = solve(inst, opts);
    EXPECT_TRUE(res.fits) << entry.path().filename().string() << ": height " << res.height_bytes;
    const validation check = validate(inst, res.best, 1048576);
    EXPECT_TRUE(check.ok) << check.message;
    ++planned;
  }
  EXPECT_EQ(planned, 11);
}

}  // namespace
}  // namespace memkit::planner

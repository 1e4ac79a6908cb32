// Whole-graph memory planning: give every buffer of a known schedule an offset in one
// arena, as low as possible (docs/ARCHITECTURE.md, "Arrays, planner, tools").
//
// The problem. Each buffer has a size and a half-open lifetime [lower, upper). Two
// buffers whose lifetimes overlap must not overlap in memory. A plan gives each buffer
// an offset; its height is the largest offset + size. No plan is lower than LOAD, the
// largest sum of sizes live at one moment, so height / LOAD is the figure of merit.
// Placement works on numbers only: nothing here touches a device.
//
// How solve() works:
//   1. Greedy best fit by decreasing size (the TFLite / XLA heuristic) gives a valid
//      plan in O(n^2) at once; every later step only replaces it with a lower one.
//      Best fit run online over the schedule (each buffer placed at its birth,
//      O(n log n)) replaces it where lower: when the time limit cuts best fit
//      short, or on a growing cache.
//   2. Best fit again in "peak-first" order (buffers live through the highest load
//      first, then larger first) and in two sweeps through time (latest death first,
//      earliest birth first); from the lowest of the three, repaired for a few rounds:
//      the buffers that end above the target are moved halfway to the front of the
//      order and best fit runs again. On long real schedules this reaches LOAD where
//      the search cannot start; the backward sweep suits loops whose load climbs to a
//      peak at their end (generation with a growing cache). On the steps of a loop cut
//      into bands (step 3), a fourth order takes larger size classes (powers of two)
//      first, each class swept backward (a generate step's logits before its growing
//      cache), and three quarters of the time go to a hill climb over orders that
//      keeps an order only when best fit lands no higher. There, too, chains of copies
//      (a KV cache copied as it grows and as beam search reorders it) may get fixed
//      slots, with two spares kept free at the peaks, best fit placing the rest around
//      them; the climb starts from that plan where it lands lower. On an instance
//      (or part) of over 10,000 buffers still above its goal, half the time left then
//      goes to windows: a buffer at the top is picked, the buffers born and dead within
//      a window of time around it (a few hundred to a few thousand) are planned again
//      as one window of the rolling horizon (below) around the rest, which stays, and
//      the plan is kept when lower, or as high with fewer buffers at the top.
//   3. The instance is split into parts that can be planned alone: a buffer live over
//      the whole time span of its part goes to the bottom (every other buffer there is
//      wholly above or below it, so swapping it down loses nothing), and the rest is cut
//      at moments no buffer crosses. A long-lived buffer that does not span its part
//      goes to the bottom too where the rest then splits and the bytes live while it is
//      dead, plus the stack's, stay within LOAD (a loop's lasting buffers would
//      otherwise hold all its steps in one part). A group of over 4096 buffers,
//      at least half the instance's, that still does not split is cut where the bytes
//      crossing are few (a loop whose steps each pass a small buffer to the next, as a
//      training loop its loss): the crossing buffers are planned apart as a band at the
//      bottom, kept when it lifts the group at most 2^-20 of its LOAD above it, and the
//      steps it frees are not cut again. Where no band is kept, the group may be cut at
//      moments where at most 1/256 of its LOAD crosses, taken in time order only where
//      the buffers crossing were born after those of the cut before died (a loop whose
//      steps each hand on a buffer that outlives the next step's peak: every other
//      step): those rest at the bottom, each only where it lives, and the pieces
//      between the cuts are planned above the floor they make, kept when the floor
//      plus the bytes live above it stay within LOAD at every moment. A band may keep
//      the whole off LOAD, and a floor constrains it, so an instance that needs either
//      is first planned whole in a quarter of the time, and cut only if that plan is
//      above LOAD. Time is compressed to the sections between events. A large
//      instance that splits is planned part by part, each with steps 1-7 of its own (a
//      part over a floor, with the floor's buffers fixed), in a share of the time,
//      stopping once the whole is at LOAD; parts that are the same but for a shift in time
//      (a loop's steps) are planned once, and a part with the same lifetimes as an earlier
//      one and at most one size in 16 different (a step drawn from the same bucket) takes
//      the earlier one's plan, its grown buffers placed again by best fit: the earlier one
//      is searched with the time of both. A large instance that stays one group of over
//      250,000 buffers (a serving loop: its requests' caches cross every moment) is
//      planned by a rolling horizon instead, best fit over it whole costing its square:
//      the buffers taken by birth in windows of 5,000, each window planned by best fit in
//      four orders and repaired towards LOAD around the earlier windows' buffers still
//      alive, which stay where they were put (or the online floor, if lower), then
//      windows around the top as in step 2 until the time is up; there is no search.
//   4. Each part is searched depth first over canonical plans: buffers are placed in
//      order of non-decreasing offset, each at the lowest offset its already-placed
//      neighbours in time allow (every plan can be pushed down into such a form without
//      growing). At the current level the search takes a time section (the least
//      slack, the fewest candidates or the earliest, by restart) and branches on which
//      buffer covers it at that level, or on none; buffers that fill the open stretch
//      around the section flush, with their top meeting a neighbouring floor, go first.
//      Pruning: each unplaced buffer has a lowest possible start (the level, its
//      resting floor, or the level plus its smallest neighbour's size); in every
//      section, for every x, the buffers that cannot start below x must fit between x
//      and the capacity. A buffer that could drop into a gap under the level nothing
//      fills any more ends the branch (the plan with it down there is no higher).
//      States met when the level rises are hashed, and those whose subtree was
//      exhausted are not searched again. Identical buffers are tried once.
//   5. When the level rises and the unplaced buffers fall into groups that share no
//      moment, each group is searched alone above the current floors (and remembered
//      when it fails), so a failure in one does not undo choices made in the others.
//   6. Runs restart after node budgets following the Luby sequence, each with another
//      candidate order and section rule: run lengths vary wildly with the order, so
//      many short runs beat one long one, and the long runs still come to prove a
//      capacity infeasible.
//   7. Without a capacity, the search is run for capacities between LOAD and the best
//      height found (LOAD first, then bisection), each attempt with a share of the time
//      limit; the lowest valid plan found is kept, and it is optimal when it reaches
//      LOAD or when every lower capacity was proven infeasible.
// Every plan solve() returns has been checked with validate().
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "memkit/errors.hpp"

namespace memkit::planner {

// Errors from reading instances and traces; the message starts with the function
// and names the file and line: "[memkit::planner::read_instance] A.csv:17: ...".
class planner_error : public error {
 public:
  using error::error;
};

struct buffer {
  std::int64_t id = 0;     // as written in the instance; unique
  std::int64_t lower = 0;  // first moment the buffer is live
  std::int64_t upper = 0;  // first moment it is dead again (lower < upper)
  std::int64_t size = 0;   // bytes, > 0
};

// The buffers' sizes sum to at most kMaxTotalBytes, so that every offset and height
// fits in 64 bits; the readers and solve() refuse larger instances.
inline constexpr std::int64_t kMaxTotalBytes = std::int64_t{1} << 62;
// Buffers an instance may have (12x the largest real one known, gpt2_generate's
// 677k): past it the readers refuse the input rather than spend minutes and GBs.
inline constexpr std::size_t kMaxBuffers = std::size_t{1} << 23;

struct instance {
  std::vector<buffer> buffers;
};

// offsets[i] is the offset of instance.buffers[i].
struct plan {
  std::vector<std::int64_t> offsets;
};

// CSV with the header `id,lower,upper,size`, one buffer a line. Rejects malformed
// lines, non-numeric or negative fields, empty lifetimes, sizes <= 0 and duplicate ids.
instance read_instance(const std::string& path);
// The same from a stream; `name` is used in messages in place of the file name.
instance parse_instance(std::istream& in, const std::string& name);

// CSV with the header `id,lower,upper,size,offset`, in instance order.
void write_plan(std::ostream& out, const instance& inst, const plan& p);
void write_plan(const std::string& path, const instance& inst, const plan& p);

// Converts an allocation trace, read by trace::read (every format `memkit replay`
// reads: memkit CSV, RMM logs, PyTorch snapshots; gzip or plain), into an instance
// whose time is the event index: a block allocated by event i and freed by event j
// lives over [i, j); blocks never freed live to the end. Zero-byte allocations are
// skipped. Throws trace::trace_error for a trace it cannot read, planner_error for
// one whose sizes sum past kMaxTotalBytes.
instance instance_from_trace(const std::string& path);

// LOAD: the largest sum of sizes live at one moment; no plan is lower.
std::int64_t load(const instance& inst);
// The largest offset + size of a plan (0 for an empty instance).
std::int64_t height(const instance& inst, const plan& p);

struct validation {
  bool ok = true;
  std::string message;  // empty when ok; otherwise what is wrong, naming the buffers
  explicit operator bool() const noexcept { return ok; }
};

// Checks that the plan has one non-negative offset per buffer, that no two buffers
// live at the same moment share a byte, and (when given) that the height fits within
// `capacity`. O(n log n).
validation validate(const instance& inst, const plan& p,
                    std::optional<std::int64_t> capacity = std::nullopt);

// Best fit by decreasing size: each buffer, largest first, takes the smallest gap
// among the buffers already placed that overlap it in time, or goes on top.
plan greedy_best_fit(const instance& inst);

struct options {
  // Without a capacity, solve() minimises the height until it reaches LOAD or runs
  // out of time. With one, it looks for a plan that fits and, unless
  // `minimize_within_capacity`, stops at the first one found.
  std::optional<std::int64_t> capacity;
  bool minimize_within_capacity = false;
  double time_limit_seconds = 10.0;
};

struct result {
  plan best;                      // always valid; the lowest plan found
  std::int64_t load_bytes = 0;    // LOAD
  std::int64_t height_bytes = 0;  // height of `best`
  std::int64_t greedy_height_bytes = 0;
  bool fits = true;         // height_bytes <= capacity (true without one)
  bool optimal = false;     // no lower plan exists (height == LOAD or proven)
  double seconds = 0.0;     // wall time spent in solve()
  std::uint64_t nodes = 0;  // search nodes visited, all attempts together
  std::size_t parts = 0;    // independent parts the instance split into
};

result solve(const instance& inst, const options& opts = {});

}  // namespace memkit::planner

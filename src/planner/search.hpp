// The planner's internals: splitting an instance into parts and the depth-first search
// over canonical plans of one part (see the design comment in memkit/planner.hpp).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <unordered_set>
#include <utility>
#include <vector>

#include "memkit/planner.hpp"

namespace memkit::planner::detail {

// splitmix64's finaliser: a well-mixed 64-bit hash step.
inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

using clock = std::chrono::steady_clock;

// A part of an instance that can be planned on its own, above `base`.
struct part {
  std::vector<std::size_t> members;  // indices into instance.buffers
  std::int64_t base = 0;
  // Buffers the split fixed at the part's bottom where they live (see
  // calculate_floor_cut in search.cpp): the part is planned above their tops there, and
  // on `base` elsewhere. Each is shared with the part on its other side in time.
  std::vector<std::size_t> resting;
};

// A buffer fixed under a part, as the floor it makes: the part's buffers live in
// [lower, upper) go at `top` or above (relative to the part's base).
struct floor_piece {
  std::int64_t lower = 0;
  std::int64_t upper = 0;
  std::int64_t top = 0;
};

struct decomposition {
  // Offsets fixed by the split (buffers stacked at the bottom of their group where
  // that costs no height: see calculate_bottom_stack in search.cpp); -1 for buffers
  // that belong to a part.
  std::vector<std::int64_t> fixed_offsets;
  std::vector<part> parts;
};

// A group of more buffers than this, holding at least half of the instance's, that
// does not split may be cut where only a few bytes cross, when `cut_bands` (see
// calculate_band in search.cpp): the search rarely helps a part of thousands of
// buffers (a training loop's 25 steps held together by the loss each step hands to
// the next: 6k-77k buffers, left 0.2-0.5% above LOAD in 60 s), while best fit and the
// search on its steps cost far less. Smaller groups are left whole, so that the
// search can still reach their LOAD; solve() plans a group whole first in any case,
// and cuts it only when that stays above LOAD.
inline constexpr std::size_t kBandMinBuffers = 4096;

decomposition decompose(const instance& inst, bool cut_bands = false);

// Time compressed to the moments where a buffer is born or dies: section k runs from
// points[k] to points[k + 1].
struct sections {
  explicit sections(const instance& inst);
  std::vector<std::int64_t> points;  // sorted, each once
  std::size_t count() const { return points.size(); }
  // The section starting at `time`, a moment of the instance.
  std::size_t of(std::int64_t time) const {
    return static_cast<std::size_t>(std::lower_bound(points.begin(), points.end(), time) -
                                    points.begin());
  }
};

// Best fit run as an online allocator over the schedule (each buffer placed at its
// birth, its range free again at its death): O(n log n), the floor when best fit in
// an order runs out of time.
plan online_best_fit(const instance& inst);
// Best fit window by window, for an instance that is one group too large for best fit
// over the whole (a serving loop, whose requests' caches cross every moment): the
// buffers taken by birth in windows of `window`, each window planned by best fit in a
// few orders and repaired towards LOAD around the earlier windows' buffers still
// alive, which stay where they were put. Bounded by the deadline: past it, best fit
// stacks what is left.
plan rolling_horizon(const instance& inst, std::size_t window, clock::time_point deadline);
// The first moment any buffer lives and the first after the last one dies.
std::pair<std::int64_t, std::int64_t> calculate_time_span(const instance& inst);
// A large neighbourhood search after the repair, for instances too large for the search
// to help: a buffer at the top is picked, the buffers born and dead within a window of
// time around it are planned again (as rolling_horizon plans a window) around the rest,
// which stays, and the new plan is kept when it is lower, or as high with fewer buffers
// at the top. Windows of a few hundred to a few thousand buffers, at random (fixed
// seed). Until `goal` or the deadline; buffers `fixed` holds (>= 0) never move.
plan improve_by_windows(const instance& inst, plan p, std::int64_t goal, clock::time_point deadline,
                        const std::vector<std::int64_t>* fixed = nullptr);
// The repair's move: the buffers of `order` that end above `target` in `p` go halfway
// to the front of the order (taken from the back, so that earlier positions stay put).
// `late` is scratch space.
void move_late_forward(const instance& inst, const plan& p, std::int64_t target,
                       std::vector<std::size_t>& order, std::vector<std::size_t>& late);
// A plan of one part carried over to another with the same lifetimes (a step drawn
// from the same bucket): `from` and `to` list their members in the same order, `to`'s
// floor after them, fixed at the offsets in `fixed` (-1 for the members; may be empty
// when there is no floor). Each member keeps its offset in `from_offsets` but those that
// grew or meet the floor, which best fit places again, largest first, around the rest.
// Returns `to`'s height; `offsets` gets its members' offsets.
std::int64_t carry_plan(const instance& from, const std::vector<std::int64_t>& from_offsets,
                        const instance& to, std::vector<std::int64_t> fixed,
                        clock::time_point deadline, std::vector<std::int64_t>& offsets);
// Largest first, as greedy_best_fit() takes them.
std::vector<std::size_t> size_order(const instance& inst);
// Best fit taking the buffers in the given order; past the deadline the rest are
// stacked on top (valid, higher). `fixed`, when given, holds an offset for each
// buffer that is already placed (-1 for the others): those stay where they are, and
// the order may leave them out.
plan greedy_in_order(const instance& inst, const std::vector<std::size_t>& order,
                     clock::time_point deadline = clock::time_point::max(),
                     const std::vector<std::int64_t>* fixed = nullptr);
// Buffers live through the highest load first (they decide the height), then larger
// first: on long schedules this lands far nearer LOAD than size order alone.
std::vector<std::size_t> peak_first_order(const instance& inst);
// Sweeps through time: the latest death first (backward) or the earliest birth first
// (forward). Best fit in such an order acts as an online allocator run over the
// schedule, which stays near LOAD where the load climbs toward a peak at the end of
// each iteration (autoregressive generation with a growing cache).
std::vector<std::size_t> sweep_order(const instance& inst, bool backward);
// Larger size classes (powers of two) first, and within a class the latest death
// first. Best fit then places the large transients of a loop before its small
// buffers fragment the space, while each class still acts as an online allocator run
// backward, which suits a cache growing by small steps (its buffers shrink backward
// in time, so each fits where the next one was).
std::vector<std::size_t> size_class_sweep_order(const instance& inst);
// A hill climb over best-fit orders, from `order` and its plan `start`: each round
// moves the buffers that reach the height to random earlier places in the order and
// keeps the new order when best fit lands no higher. Unlike solve()'s repair, it never
// keeps a worse order, and it keeps equal ones, so that it drifts across the plateaus
// where one buffer at the top changes place at a time (generation loops gain a few
// kilobytes a round for hundreds of rounds). Stops at `until`, after `max_rounds`, or
// once the height is at most `goal`; returns the lowest plan found, `order` left as the
// order that gave it. `fixed` as for greedy_in_order: those buffers stay put. With a
// deadline far off, the rounds make it deterministic (tests).
plan climb_order(const instance& inst, std::vector<std::size_t>& order, plan start,
                 std::int64_t goal, clock::time_point until,
                 const std::vector<std::int64_t>* fixed = nullptr,
                 std::uint64_t max_rounds = ~std::uint64_t{0});

// Chains of copies laid out in fixed slots. A chain is a sequence of large buffers of
// about one size (a growing one too) where each is born within a few events of its
// predecessor's death, overlapping it briefly or not at all: a KV cache that is copied
// as it grows, and again when beam search reorders it. Best fit settles where such
// copies leave their one free slot before it places the large transients, and a hole
// the size of a slot stays inside the cache at the peaks. Here the largest group of
// chains of about one size gets one slot per chain at the bottom, as high as the
// group's largest buffer, and two spare slots (right above those, or just under
// `goal`); wherever more of the group's buffers live than it has chains, the copies
// that must live apart go to the spares, only where the other buffers leave room for
// a spare, so that at the peaks the spares are free for the large transients, which
// best fit then lays over them. Only the group's buffers born at or after `start` are
// placed (the layout before them is best fit's), and only those whose whole lives
// have room for a full slot each.
class chain_slots {
 public:
  // Finds the group and which of its buffers have room for a slot: what does not
  // depend on where the slots start (the planner tries many starts).
  chain_slots(const instance& inst, std::int64_t goal);
  // Each buffer's offset, -1 for the buffers left to best fit; all -1 when there is no
  // such group or the spares do not suffice.
  std::vector<std::int64_t> offsets(std::int64_t start, bool spares_under_goal) const;

 private:
  const instance& inst_;
  std::int64_t goal_;
  sections time_;
  std::int64_t chain_count_ = 0;      // chains in the group; 0: no group
  std::int64_t slot_ = 0;             // bytes of a slot: the group's largest buffer
  std::vector<bool> in_group_;        // per buffer: it gets a slot
  std::vector<std::int64_t> others_;  // per section: bytes live outside the slots
};

enum class search_status { found, infeasible, stopped };

// Searches one part for plans within a capacity; built once, run for several.
class part_search {
 public:
  // `skyline`, when given, holds floors the part starts from, indexed by time (used
  // for the groups a search splits off, whose times are its sections); `floors`, the
  // buffers fixed under the part (its resting ones), in the instance's time.
  part_search(const instance& inst, const std::vector<std::size_t>& members,
              const std::vector<std::int64_t>* skyline = nullptr, int depth = 0,
              const std::vector<floor_piece>* floors = nullptr);

  // LOAD of the part alone.
  std::int64_t part_load() const { return load_; }

  // Looks for offsets (relative to the part's base, in `members` order) whose height
  // is at most `capacity`. Returns infeasible only when the whole space was searched.
  search_status run(std::int64_t capacity, clock::time_point deadline,
                    std::vector<std::int64_t>& offsets, std::uint64_t node_limit = ~0ULL);

  std::uint64_t nodes() const { return nodes_; }

 private:
  std::uint64_t count_overlap_pairs() const;
  bool too_dense_ = false;  // too many overlapping pairs to search: run() stops at once
  enum class undo_kind : std::uint8_t { floor, lower_bound, offset_floor, ban, level, placed };
  struct undo_entry {
    undo_kind kind;
    std::uint32_t index;
    std::int64_t old_value;
  };
  struct choice_point {
    std::size_t trail_mark;
    std::size_t options_begin;
    std::size_t options_end;
    std::size_t next_option;
    std::uint32_t section;
    bool may_leave_empty;  // the "no buffer covers the section at this level" branch
  };

  void reset();
  // Picks the candidate order and section tie rule of the run_index-th restart.
  void configure_run(std::uint64_t run_index, std::uint64_t& random);
  void place(std::uint32_t b);
  void leave_section_empty(const choice_point& point);
  void undo_to(std::size_t mark);
  // Raises the level if nothing is left to place at it and gathers the candidates;
  // returns false when the node is dead.
  bool prepare_node();
  // Bounds every section by the lowest offset its unplaced buffers can still take.
  bool check_section_starts();
  // Searches apart the groups of unplaced buffers that share no moment; false when one
  // of them fails, and sets solved_ when all of them fit.
  bool solve_split_parts();
  // Pushes a choice point for the current node; returns false when it has no option.
  bool branch();
  // Takes the next untried option of the deepest choice point; false when exhausted.
  bool backtrack();

  int depth_ = 0;  // how many splits above this search
  // The part, time compressed to sections between consecutive events.
  std::size_t buffer_count_ = 0;
  std::size_t section_count_ = 0;
  std::vector<std::uint32_t> first_section_;  // [first, end) sections of each buffer
  std::vector<std::uint32_t> end_section_;
  std::vector<std::int64_t> size_;
  std::vector<std::uint32_t> identity_;       // equal for buffers of equal lifetime and size
  std::vector<std::uint32_t> overlap_begin_;  // CSR: buffers overlapping each buffer in time
  std::vector<std::uint32_t> overlap_;
  // Per buffer: the smallest size among the buffers overlapping it in time; one that
  // cannot go at the level rests on one of them, so at least this much above it.
  std::vector<std::int64_t> smallest_neighbour_;
  std::vector<std::vector<std::uint32_t>> orders_;  // candidate orders to restart with
  std::vector<std::int64_t> priority_;              // rank among candidates in this run
  int section_tie_rule_ = 0;                        // how this run breaks ties between sections
  std::int64_t granule_ = 1;  // gcd of sizes: every canonical offset is a multiple
  std::int64_t load_ = 0;

  // Search state.
  std::int64_t capacity_ = 0;
  std::int64_t level_ = 0;                  // offsets are placed in non-decreasing order
  std::vector<std::int64_t> floor_;         // per section: top of the placed buffers there
  std::vector<std::int64_t> lower_bound_;   // per section: raised when left empty at a level
  std::vector<std::int64_t> remaining_;     // per section: bytes still to place there
  std::vector<std::int64_t> offset_floor_;  // per buffer: max floor over its sections
  std::vector<std::int64_t> banned_at_;     // per buffer: level at which it may not go
  std::vector<std::int64_t> offset_;        // per buffer: offset once placed, else -1
  std::vector<std::uint32_t> unplaced_;     // unplaced buffers, any order
  std::vector<std::uint32_t> position_;     // index of each buffer in unplaced_
  std::vector<undo_entry> trail_;
  std::vector<choice_point> choices_;
  std::vector<std::uint32_t> options_;
  std::vector<std::uint32_t> candidates_;
  std::vector<std::int32_t> coverage_;
  std::vector<std::int64_t> section_start_;
  struct start_entry {
    std::int64_t start;
    std::uint32_t buffer;
  };
  std::vector<start_entry> elevated_;  // buffers that cannot start near the level
  std::vector<start_entry> sorted_elevated_;
  std::vector<std::uint32_t> bucket_counts_;
  void sort_elevated();

  // Nogoods: the states met when the level rises are fully described by the placed
  // set, the floors at or above the level and the level (bans and raised bounds of the
  // level below no longer matter). A state whose subtree was exhausted is remembered,
  // so reaching it again through another order of placements is cut off at once.
  std::uint64_t state_key() const;
  void remember_failed(std::uint64_t key);
  bool known_failed(std::uint64_t key) const;
  std::vector<std::uint64_t> buffer_keys_;  // random, for the placed-set hash
  std::uint64_t placed_hash_ = 0;
  std::vector<std::uint64_t> failed_states_;    // direct-mapped; 0 = empty
  std::vector<std::uint64_t> transition_keys_;  // one per level entry on the trail
  std::uint64_t nodes_ = 0;
  std::uint64_t node_limit_ = ~0ULL;
  std::uint64_t run_stop_at_ = ~0ULL;  // node count at which the current run restarts
  clock::time_point deadline_{};
  std::size_t failed_slots_ = 0;
  std::vector<std::int64_t> initial_floor_;  // per section: floor before anything is placed
  // Splitting: groups proven not to fit (by members and floors), how many split-off
  // searches gave up on their budget, and the state each level rise saw.
  std::unordered_set<std::uint64_t> failed_parts_;
  std::uint64_t stopped_parts_ = 0;
  std::vector<std::uint64_t> transition_stops_;
  std::vector<std::uint32_t> split_group_;
  std::vector<std::pair<std::uint32_t, std::int64_t>> split_offsets_;
  bool solved_ = false;
  std::vector<std::int64_t> fit_score_;
};

}  // namespace memkit::planner::detail

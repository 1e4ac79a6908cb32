// memkit's caching allocator: the public API.
//
// Design (the whole core, once):
//
//   backend   hands out segments [base, base + size) of device addresses and, where
//             it has virtual memory, address ranges and physical pages to map.
//   segment   one backend allocation, tiled by blocks in address order:
//               sum(block.size for block in segment) == segment.size
//               block.offset == previous.offset + previous.size
//   block     a piece of a segment (or of the arena's range), live or free.
//               live:  block.size >= round_up(requested, 512); the waste
//                      block.size - round_up(requested, 512) is 0 for large
//                      requests and < max(512, min(request / 2, 4 KiB)) for small
//                      ones: a cached block is reused whole rather than split into
//                      slivers (pools/segment_pool.hpp, may_leave_unsplit)
//               free:  in exactly one bin of its pool's free index, by size; two
//                      free neighbours are merged when both are safe on every
//                      queue or both wait on the same queue (else listed, and
//                      merged once their fences complete); in the arena, while
//                      one queue uses it, also a pending block and a safe one
//                      that queue used, so the layout does not depend on when
//                      fences complete (the range's untouched top stays apart)
//   pools     small (requests <= 1 MiB, <= 512 KiB beside an arena; 2 MiB segments)
//             and large (the rest), each a segregated-fit free index
//             (placement/free_index.hpp): best fit in the request's bin, first
//             fit above it; the small pool takes, of the first 4 blocks that fit,
//             the one in the lowest-addressed segment (a burst's segments empty).
//   arena     (policy arena, the default where the backend has virtual memory)
//             large blocks are placed in one reserved range 8x the device's
//             memory; a page is mapped while a live block touches it:
//               users(page) == live blocks touching it;  users > 0 => mapped
//               page strictly inside a block => users == 1 (only the end pages are shared)
//               reserved pages == mapped pages (+ pages in flight)
//             a page left without users stays mapped (idle; released LRU); it
//             moves under a new block (the highest idle pages first) only once its
//             last user's work completed, and only for the pages that new ones
//             cannot give within
//               reserved <= (1 + arena_slack) * peak active  (and the limit).
//             A move is one map: the old place keeps mapping the physical page
//             (its shadow; unmapped only when a block needs that place or the page
//             goes back), and a block placed there later takes the page back
//             with no call while it is idle where it went:
//               mapped => no shadow;  shadow(p) => p's page is held elsewhere
//             (statistics::moves, returns; allocator_options::pages tells where
//             pages hold memory, whatever the device maps).
//             With slack, a block goes where its pages are all mapped (one of 8
//             pages or more: to the shortest mapped run that holds it, so longer
//             runs stay whole), else where they are most mapped, also inside a
//             larger free range; past the slack it waits for the
//             oldest fence that frees enough idle pages (one is recorded after
//             each free that leaves pages idle), never for the whole queue.
//             The small pool beside it shares the slack: it grows by releasing
//             idle pages past it (waiting once for their work, as the arena
//             does), and its empty segments go back before pages move or grow
//             past it (waiting once for their own queue's work, as for pages).
//             With small_segments_in_arena, its segments are instead pages of the
//             arena in a small area at the range's bottom (made before any
//             block, a sixteenth of the range at most, then segments of their
//             own): placed as one-page arena blocks, they take idle pages or make
//             them within the slack, and go back as idle pages, with no call.
//             After clear_cache, pages are made again in groups (up to 16 pages
//             of one physical allocation, one mapping: one call's cost for many)
//             until the arena holds as many as before (in the current plan's
//             region, where each repetition uses every page below the plan's
//             height, by region-aligned chunks of 64 pages); a group's pages never move
//             alone, and it goes back whole, once every page of it is idle:
//               group g mapped <=> every page of g mapped to g's physical page
//             (released by LRU, or where its pages would have moved; past the
//             slack a request waits for its queue's work on an idle group as on
//             idle pages). clear_cache gives all of the cache back, also blocks
//             freed behind queued work: what is safe at once, the rest fence by
//             fence as the device completes it (the calls run beside its work).
//             (allocator/arena.hpp: the range, page map and placement; it reads
//             the fences and a budget, and returns its page counts.)
//   loop      (plan_loops) the arena learns a loop that repeats its requests
//   plan      (placement/loop_plan.hpp), plans one repetition with the planner,
//             and places the loop's blocks at their planned offsets in a region:
//             a pool over a placeholder block of the range, made at the loop's cut
//             and only where online placement moved pages the repetition before:
//               no two planned blocks live at once overlap;
//               LOAD <= plan height <= 1.01 LOAD <= region
//             a planned place still in use, or a request off the plan, is placed
//             online; the planned blocks found holding it outlived their plan and
//             are placed online from then on (past 1% of LOAD, the loop is learned
//             again). The steady state then touches the same pages every step.
//             Only the blocks of the queue with most of the loop's bytes are
//             planned (a place one queue freed serves another only after a fence).
//             A plan that needed its region is kept when another replaces it (up
//             to 8: a loop of a few shapes, say batch sizes drawn per step) and
//             comes back when its first requests do; the next plan takes the last
//             region when that is empty and high enough (regions are as high as
//             the highest plan kept), so that shapes share their pages. While no
//             plan places in a region (its loop lost: an eval phase between
//             training steps, say; or its plan replaced), it lends its free mapped
//             runs to online blocks of its queue, at the top of the highest run
//             that holds them, rather than have them take its idle pages; blocks
//             lent there do not keep the next plan out (a planned block whose place
//             one holds goes online while it does).
//   fences    a block freed on queue q is reusable at once on q; on another
//             queue r once a fence recorded on q after the free completes, or
//             (order_queues, where the backend has queue_ordering) once r's later
//             work waits for that fence on the device: a request that would
//             otherwise grow first orders r after the other queues' frees so far
//             (one fence and one device wait per queue) and retries
//             (allocator/fences.hpp: the safe and ordered serials of each queue).
//   thread    each thread parks up to 2 MiB of small freed blocks and serves its
//   caches    own repeats from them without the lock (allocator/thread_cache.hpp);
//             and holds back the arena block (<= 1 MiB) it freed last until its
//             next call: a request of that size takes it back, any other call
//             gives it to the arena first (the arena sees the frees in order).
//
//   Counters (exact under the lock; the thread caches keep their differences):
//     active_bytes   == sum(block.size for live blocks)
//     reserved_bytes == sum(segment.size) + mapped pages * page size
//     cached_bytes   == reserved_bytes - active_bytes
//     reserved_bytes <= memory_limit (checked before any backend call)
//   calculate_statistics() recounts them from the blocks; validation mode checks
//   every invariant above after every operation. With thread caches, the peaks
//   are kept on the shared counters and are an upper bound until the caches are
//   flushed (reset_peak flushes them).
//
//   Locking: one mutex guards the pools, the arena, the fences and the counters;
//   it is never held across a backend call (segments and pages are allocated,
//   mapped and freed, fences waited on, outside it). A page being mapped or
//   unmapped outside it is busy: no other request maps or takes it until the call is
//   done (a request over it waits). Order: registry of thread caches, mutex, a cache.
//
// Pressure: when a request does not fit, the allocator (1) polls fences, (2) orders
// its queue after the other queues' pending frees (order_queues), (3) grows if the
// memory limit allows, (4) releases cached segments and idle pages, least recently
// used first, (5) flushes the thread caches, (6) waits for queued work whose fences
// hold free blocks, then retries, and finally (7) throws out_of_memory naming the
// request, live, cached and reserved bytes, the limit and the largest free block. A
// request that fails changes no statistics but the out_of_memory count and the
// waits and orderings it made on the way (retries, queue_orders: they happened, and
// their fences stay known). Beside an arena, a request that would grow reserved bytes
// past the slack first flushes the thread caches and releases empty small segments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "memkit/backend.hpp"
#include "memkit/errors.hpp"
#include "memkit/statistics.hpp"

namespace memkit {

// What allocate hands out. size is the block's real size (>= the request).
struct allocation {
  address_t address = 0;
  std::size_t size = 0;
};

// Where large blocks live. segments: one backend segment per request, split and
// merged. arena: one reserved address range with physical pages mapped only under
// live blocks (needs a backend with virtual memory). automatic: arena where the
// backend has virtual memory, else segments.
enum class pool_policy { automatic, segments, arena };

// Told of the arena's pages as they come to hold memory at an address or stop to:
// a page that moves is unheld at its old address and held at its new one, whatever
// the device is told (a moved page stays mapped where it was until that address is
// needed, and may move back there with no call at all). Called under the
// allocator's lock: keep it short and call nothing of the allocator.
class page_listener {
 public:
  virtual ~page_listener() = default;
  virtual void on_pages(address_t at, std::size_t bytes, bool held) = 0;
};

struct allocator_options {
  pool_policy policy = pool_policy::automatic;
  std::size_t memory_limit = 0;  // 0: the backend's capacity
  std::size_t cache_limit = 0;   // 0: the memory limit
  std::size_t wired_limit = 0;   // 0: none wired
  bool validate = false;         // check every invariant after every operation
  bool thread_cache = true;      // per-thread caches of freed blocks (see above)
  // Arena: map new physical pages rather than move idle ones while reserved stays
  // within this fraction above the peak of active bytes (aimed a fortieth inside it:
  // a new peak's pages and the requests' rounding overshoot the aim); past it, wait
  // once for the work holding idle pages rather than grow. 0 seeks the floor (memkit
  // replay --arena-slack 0); the 2% default, memkit replay's too, keeps a training
  // loop free of remapping (docs/BENCHMARKS.md).
  double arena_slack = 0.02;
  // Arena: learn a loop that repeats its requests and place its blocks where a plan
  // of one repetition puts them, so that its steady state moves no page
  // (placement/loop_plan.hpp). Off: every block is placed online.
  bool plan_loops = true;
  // Where the backend can make one queue's work wait for another's on the device
  // (device_facts::queue_ordering): before growing, a request orders its queue after
  // the other queues' pending frees and reuses their blocks at once (as
  // cudaMallocAsync's internal dependencies do). Off: another queue's free is
  // reused only once its fence completes.
  bool order_queues = true;
  // Arena: the small pool's 2 MiB segments are pages of the arena, in a part of its
  // range apart from the large blocks, rather than segments of their own: an empty one
  // goes back as an idle page, and a new one takes an idle page or makes one, with no
  // segment call (docs/BENCHMARKS.md, forty-fifth session). Off until it has run on the
  // GPU machine.
  bool small_segments_in_arena = false;
  // Non-empty: record every successful allocate and free to this file, as a memkit
  // trace that `memkit replay` reads back (see start_recording).
  std::string record_path = {};
  // Told of the arena's pages (see page_listener); must outlive the allocator.
  page_listener* pages = nullptr;
};

// A view of the allocator's layout, for reports (the segment map of memkit replay).
struct block_view {
  std::size_t offset = 0;  // from the segment's base
  std::size_t size = 0;
  std::size_t requested = 0;  // 0 when free
  bool live = false;
};
struct segment_view {
  address_t base = 0;
  std::size_t size = 0;
  bool small = false;  // belongs to the small-block pool
  std::vector<block_view> blocks;
};

// The arena's loop plan (see allocator_options::plan_loops), for reports: the loop it
// follows, and why a repetition found was not planned.
struct loop_report {
  std::size_t period = 0;                 // requests in one repetition of the plan (0: none)
  std::size_t load_bytes = 0;             // its LOAD: the most planned bytes live at once
  std::size_t height_bytes = 0;           // its plan's height (at most 1.01 x load_bytes)
  std::uint64_t placed = 0;               // requests placed where a plan put them
  std::uint64_t plans = 0;                // plans made (stored ones brought back: revivals)
  std::uint64_t searches = 0;             // plans searched (each holds the lock up to 50 ms)
  std::uint64_t declined = 0;             // repetitions whose plan was too high to use ...
  std::size_t declined_load_bytes = 0;    // ... the lowest over its LOAD: its LOAD
  std::size_t declined_height_bytes = 0;  // ... and its plan's height
  std::uint64_t losses = 0;               // times the loop followed was lost
  std::uint64_t missed = 0;               // planned requests placed online (place in use)
  std::uint64_t revivals = 0;             // stored plans brought back (a loop's shapes)
};

class allocator {
 public:
  explicit allocator(backend& device, allocator_options options = {});
  ~allocator();  // gives every segment back; live blocks are forgotten
  allocator(const allocator&) = delete;
  allocator& operator=(const allocator&) = delete;

  // A block of at least `bytes`, usable on `queue`. bytes == 0 gives {0, 0} and
  // costs nothing. Throws invalid_argument above the device's largest buffer,
  // out_of_memory when nothing can make room.
  allocation allocate(std::size_t bytes, queue_id queue = 0);
  // Frees a block; its memory is reusable at once on the queue it was allocated
  // on and on other queues once the work submitted so far completes. free(0)
  // does nothing; an unknown address throws invalid_argument.
  void free(address_t address);
  // The block is also used by work on `queue` (like a stream record): its reuse
  // after free waits for that queue's work submitted by the time of the free.
  void record_use(address_t address, queue_id queue);
  // The real size of a live block.
  std::size_t get_size(address_t address) const;

  // Limits. Each setter returns the previous value. set_memory_limit(0) allows no
  // memory at all (allocator_options::memory_limit = 0 means the capacity instead).
  std::size_t set_memory_limit(std::size_t bytes);
  std::size_t set_cache_limit(std::size_t bytes);
  std::size_t set_wired_limit(std::size_t bytes);  // above the backend's max_wired: throws
  std::size_t get_memory_limit() const;
  std::size_t get_cache_limit() const;
  std::size_t get_wired_limit() const;

  statistics get_statistics() const;        // the counters, cheap
  statistics calculate_statistics() const;  // recount from every block; throws
                                            // invariant_violation if counters disagree
  void reset_peak();                        // peaks := current values
  void clear_cache();  // gives every free segment and idle page back, waiting for the
                       // queued work of freed blocks fence by fence (as
                       // torch.cuda.empty_cache)
  std::size_t calculate_largest_free_block() const;
  std::vector<segment_view> calculate_segments() const;
  loop_report get_loop_report() const;  // zeros without an arena

  void set_validation(bool on);  // check invariants after every operation
  void validate() const;         // check them now; throws invariant_violation

  // Records every successful allocate and free from now on to `path` (replaced), as
  // a memkit trace: `a,<address>,<bytes>,<queue>,<ns>` and `f,<address>,<ns>` lines
  // that `memkit replay` reads back. Blocks live before the start are left out, and
  // so are their frees. Throws invalid_argument naming a path it cannot open (and
  // changes nothing then). stop_recording closes the file and returns the events.
  void start_recording(const std::string& path);
  std::uint64_t stop_recording();

  backend& get_backend() const noexcept;

 private:
  struct state;
  allocation allocate_unrecorded(std::size_t bytes, queue_id queue);
  void free_unrecorded(address_t address);
  std::unique_ptr<state> state_;
};

}  // namespace memkit

// Segment pools: segments from the backend, tiled by blocks that split and merge.
// The data structures and their invariants are described once, at the top of
// include/memkit/allocator.hpp; this file holds the records and their operations.
// The offsets are the sub-range placer's (placement/range_placer.hpp), which the
// arrays layer's handle pool uses too; a pool adds segments, queues and fences.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "memkit/types.hpp"
#include "placement/range_placer.hpp"

namespace memkit::pools {

inline constexpr std::size_t kQuantum = 512;                        // request rounding
inline constexpr std::size_t kSmallRequest = std::size_t{1} << 20;  // small pool: <= 1 MiB
// Beside an arena, the small pool serves up to 512 KiB: a 2 MiB segment holds too
// few larger blocks, and one left live strands the rest of it (T5's 1 MiB
// parameters, docs/BENCHMARKS.md); the arena shares pages between any sizes.
inline constexpr std::size_t kSmallRequestWithArena = std::size_t{512} << 10;
inline constexpr std::size_t kSmallSegment = std::size_t{2} << 20;  // small segments: 2 MiB
inline constexpr std::size_t kSmallWaste = 4096;                    // most a small reuse may waste

struct segment;

// Of the free serials of things waiting on one queue's work (idle pages, empty
// segments), the one after which `count` of them (or all) are free; 0 when none waits.
inline serial_t serial_freeing(std::vector<serial_t>& waiting, std::size_t count) {
  if (waiting.empty() || count == 0) return 0;
  const std::size_t wanted = std::min(count, waiting.size());
  std::nth_element(waiting.begin(), waiting.begin() + static_cast<std::ptrdiff_t>(wanted - 1),
                   waiting.end());
  return waiting[wanted - 1];
}

// Aligned to a cache line: blocks parked and handed out by different threads' caches
// must not share one, or every cache hit would bounce it between cores.
struct alignas(64) block : placement::range_node {
  segment* owner = nullptr;                  // the segment the block lies in
  std::size_t requested = 0;                 // live: bytes asked for; free: 0
  serial_t free_serial = 0;                  // free: when it was freed; safe for every queue once
                                             // free_serial <= safe_serial[queue]
  queue_id queue = 0;                        // live: queue it serves; free: queue that used it last
  bool live = false;                         // handed out
  bool deferred = false;                     // free but waiting for other queues' recorded uses
  bool used_elsewhere = false;               // live and record_use named another queue
  bool lent = false;                         // arena: placed online in a plan's region
  std::uint32_t unmerged_slot = kNotListed;  // place in the list of blocks left apart
  // Live: a number unique to this hand-out; free: 0. Read without the lock by a
  // thread cache checking that a block it handed out was not freed elsewhere.
  std::atomic<std::uint64_t> stamp{0};
  std::uint64_t loop_serial = 0;  // arena: the request's serial in the loop plan
  // Live or parked: the bytes the allocator's shared counters hold for its request
  // (the request the shared path served; a thread cache keeps any difference).
  std::size_t counted_requested = 0;

  bool is_listed() const { return unmerged_slot != kNotListed; }
  static constexpr std::uint32_t kNotListed = ~0u;
  // A block split off `from` keeps its segment, queue and fence state.
  void inherit(const block& from) {
    owner = from.owner;
    queue = from.queue;
    free_serial = from.free_serial;
  }
  // Back to a fresh record; the stamp is left to the allocator.
  void reset() {
    static_cast<placement::range_node&>(*this) = placement::range_node{};
    owner = nullptr;
    requested = 0;
    free_serial = 0;
    queue = 0;
    live = false;
    deferred = false;
    used_elsewhere = false;
    lent = false;
    unmerged_slot = kNotListed;
    loop_serial = 0;
    counted_requested = 0;
  }
};

class segment_pool;

struct segment {
  segment_pool* pool = nullptr;  // the pool it belongs to
  address_t base = 0;            // first device address
  std::size_t size = 0;          // bytes, a multiple of the granularity
  block* first = nullptr;        // lowest block
  std::size_t live_blocks = 0;   // blocks handed out
  segment* prev_idle = nullptr;  // idle list (live_blocks == 0), most recent first
  segment* next_idle = nullptr;
  bool idle = false;             // on the idle list
  bool small = false;            // belongs to the small pool
  bool virtual_range = false;    // an arena's reserved address range, not memory
  block* arena_block = nullptr;  // small pool: the arena's block it lies on, or none
};

// The waste a reuse of `block_size` bytes for a request of `size` may leave unsplit.
inline bool may_leave_unsplit(std::size_t block_size, std::size_t size, bool small) {
  const std::size_t rest = block_size - size;
  if (!small) return rest < kQuantum;
  return rest < kQuantum || rest < std::min(size / 2, kSmallWaste);
}

// Which free blocks each queue may reuse (the fence tracker's arrays, stable for its
// life): a block freed on queue a at serial s is usable on queue q when q == a, when
// s <= safe[a] (a's work before the free completed), or when
// s <= ordered[q * queue_count + a] (q's later work waits for that work on the device).
struct reuse_view {
  const serial_t* safe = nullptr;
  const serial_t* ordered = nullptr;  // null: no queue is ordered after another
  std::size_t queue_count = 0;
};

class segment_pool {
 public:
  segment_pool(bool small, reuse_view reuse) : small_(small), reuse_(reuse) {}
  // safe_serial[q]: blocks freed on q with free_serial <= it are safe on every queue.
  segment_pool(bool small, const serial_t* safe_serial)
      : segment_pool(small, reuse_view{safe_serial, nullptr, 0}) {}
  ~segment_pool();
  segment_pool(const segment_pool&) = delete;
  segment_pool& operator=(const segment_pool&) = delete;

  bool is_safe(const block* b) const { return b->free_serial <= reuse_.safe[b->queue]; }
  // Whether free block b may be reused on `queue` now (see reuse_view).
  bool is_usable(const block* b, queue_id queue) const {
    return b->queue == queue || is_safe(b) ||
           (reuse_.ordered &&
            b->free_serial <= reuse_.ordered[queue * reuse_.queue_count + b->queue]);
  }
  // Whether carving `size` bytes from free block b takes its high end.
  bool place_high(const block* b, std::size_t size) const;

  // Hot path: the best free block usable on `queue` (the small pool's: see
  // find_in_lowest_segment), split to `size`, now live.
  // `previous_queue`, when given, receives the queue the free block had.
  block* take(std::size_t size, queue_id queue, queue_id* previous_queue = nullptr) {
    block* found = small_ ? find_in_lowest_segment(size, queue)
                          : placer_.find(size, [&](const block* b) { return is_usable(b, queue); });
    if (!found) return nullptr;
    if (previous_queue) *previous_queue = found->queue;
    return carve(found, size, queue);
  }

  // An arena's address range: one free block, nothing carved.
  void add_free_segment(address_t base, std::size_t segment_size);
  // As take, but only blocks that `also(block, start_offset)` accepts, where
  // start_offset is where the carved block would begin.
  template <class Also>
  block* take_where(std::size_t size, queue_id queue, Also&& also, queue_id* previous_queue) {
    block* found = placer_.find(size, [&](const block* b) {
      if (!is_usable(b, queue)) return false;
      const bool high = !may_leave_unsplit(b->size, size, small_) && place_high(b, size);
      return also(b, high ? b->offset + b->size - size : b->offset);
    });
    if (!found) return nullptr;
    if (previous_queue) *previous_queue = found->queue;
    return carve(found, size, queue);
  }
  // Calls visit(block) on free blocks of at least `size` bytes usable on `queue`,
  // smallest bins first, until it returns true.
  template <class Visit>
  void visit_usable(std::size_t size, queue_id queue, Visit&& visit) const {
    placer_.visit_fits(size, [&](const block* b) { return is_usable(b, queue) && visit(b); });
  }
  // The same for a pool indexed by address (set_index_by_address), lowest first.
  template <class Visit>
  void visit_usable_by_address(std::size_t size, queue_id queue, Visit&& visit) const {
    placer_.visit_fits_by_offset(size,
                                 [&](const block* b) { return is_usable(b, queue) && visit(b); });
  }
  // Carves `size` bytes starting at offset `start` inside free block b for `queue`.
  block* take_at(const block* b, std::uint64_t start, std::size_t size, queue_id queue,
                 queue_id* previous_queue);
  // A new segment; returns the block of `size` carved from it for `queue`.
  block* add_segment(address_t base, std::size_t segment_size, std::size_t size, queue_id queue);
  // Returns a live block; it merges with free neighbours its state allows.
  void give_back(block* b, serial_t free_serial);
  // Frees a live block used on other queues too: kept out of the index until
  // release_deferred, once their work is known complete.
  void defer(block* b);
  // A deferred block becomes reusable.
  void release_deferred(block* b);
  // Blocks that could not merge because their queues differed: try again.
  void merge_unmerged();
  // An idle, safe segment to release, least recently used first; nullptr if none.
  segment* get_releasable() const;
  // Whether s is one free block, in the index (not deferred).
  static bool is_whole_free(const segment* s) {
    return s->idle && s->first->size == s->size && s->first->indexed;
  }
  // Whether s can go back to the backend: one free block, safe on every queue.
  bool is_releasable(const segment* s) const { return is_whole_free(s) && is_safe(s->first); }
  // Bytes of every segment that could go back now.
  std::size_t calculate_releasable() const;
  // Of the empty segments that only wait for `queue`'s work, the free serial after
  // which `count` of them (or all) could go back; 0 when none waits.
  serial_t calculate_wait_serial(queue_id queue, std::size_t count) const;
  void remove_segment(segment* s);  // s must be idle: its one block free and indexed

  std::size_t calculate_largest_free() const;
  const std::vector<segment*>& get_segments() const { return segments_; }
  bool is_small() const { return small_; }
  // Pages the pool's memory is mapped in (an arena; a power of two): placement then
  // favours sharing partly used pages. 0: no pages.
  void set_page_size(std::size_t bytes) { page_size_ = bytes; }
  // Whether the untouched top stays apart from pending blocks (see can_merge): a
  // region only one plan places in needs no free top for other queues.
  void set_keep_top_apart(bool on) { keep_top_apart_ = on; }
  // Free blocks are kept by address instead of by size, for find_free_at (a loop
  // plan's region); take, take_where and visit_usable then find nothing. Set before
  // the first segment.
  void set_index_by_address(bool on) { placer_.set_index_by_offset(on); }
  // The free block holding [offset, offset + size), or nullptr; needs the above.
  block* find_free_at(std::uint64_t offset, std::size_t size) const {
    return placer_.find_at(offset, size);
  }
  // Free blocks of one queue merge whatever their fence state (see can_merge).
  void set_merge_by_queue(bool on) { merge_by_queue_ = on; }
  // Checks the pool's invariants; throws invariant_violation naming the first broken one.
  void validate(std::size_t* live_bytes, std::size_t* free_bytes, std::size_t* live_blocks,
                std::size_t* requested_bytes) const;

 private:
  // Small blocks: of the first kSmallCandidates usable blocks that fit (smallest bins
  // first), the one in the lowest-addressed segment. Blocks that outlive a burst then
  // gather in the oldest segments, and the segments a burst added empty and go back.
  static constexpr int kSmallCandidates = 4;
  block* find_in_lowest_segment(std::size_t size, queue_id queue) const {
    block* found = nullptr;
    int seen = 0;
    placer_.visit_fits(size, [&](const block* b) {
      if (!is_usable(b, queue)) return false;
      if (!found || b->owner->base < found->owner->base) found = const_cast<block*>(b);
      return ++seen == kSmallCandidates;
    });
    return found;
  }
  block* carve(block* b, std::size_t size, queue_id queue);
  // b keeps its first `head` bytes; the new free block above takes b's state.
  block* split_off(block* b, std::uint64_t head) { return placer_.split(b, head); }
  // carve, for a block already out of the index; `high`: take its high end.
  block* carve_out(block* b, std::size_t size, queue_id queue, bool high);
  block* add_free(address_t base, std::size_t segment_size, bool virtual_range);
  bool can_merge(const block* lower, const block* upper) const;
  // Into and out of the free index (by size, or by address where kept).
  void file(block* b) { placer_.file(b); }
  void unfile(block* b) { placer_.unfile(b); }
  // What the union of two free neighbours keeps: the later fence state, and
  // upper's place in the list of blocks left apart. Then the placer merges them.
  void join_state(block* lower, block* upper);
  block* merge(block* lower, block* upper);  // both free and out of the index
  void list_unmerged(block* b);
  void discard(block* b);  // recycles a record, unlisting it first
  void set_idle(segment* s, bool idle);

  bool small_;
  std::size_t page_size_ = 0;
  bool merge_by_queue_ = false;
  bool keep_top_apart_ = true;
  reuse_view reuse_;
  placement::range_placer<block> placer_;
  std::vector<segment*> segments_;
  segment* idle_head_ = nullptr;  // most recently idle
  segment* idle_tail_ = nullptr;  // least recently idle
  std::vector<block*> unmerged_;  // blocks left apart from a free neighbour by fence state;
                                  // null where one merged away since
};

}  // namespace memkit::pools

// The allocator's private state, shared by its source files. The design and its
// invariants are described once, in include/memkit/allocator.hpp.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "allocator/arena.hpp"
#include "allocator/fences.hpp"
#include "allocator/recorder.hpp"
#include "allocator/thread_cache.hpp"
#include "common/helpers.hpp"
#include "memkit/allocator.hpp"
#include "pools/address_map.hpp"
#include "pools/segment_pool.hpp"

namespace memkit {

using pools::block;
using pools::segment;
using pools::segment_pool;

// A freed block that other queues used too (record_use): reusable once every
// queue in `queues` is safe past `serial`.
struct deferred_block {
  block* b;
  std::vector<queue_id> queues;
  std::uint64_t serial;
};

struct released_segment {
  address_t base;
  std::size_t size;
};

struct allocator::state {
  state(backend& b, const allocator_options& options);

  backend& device;
  device_facts facts;                    // copied once: the hot path reads it lock-free
  mutable std::mutex mutex;              // guards everything below
  std::condition_variable pages_mapped;  // signalled when busy pages finish (un)mapping
  fence_tracker fences;                  // per queue: fences recorded, frees safe everywhere
  segment_pool small;                    // requests <= small_max
  segment_pool large;                    // larger requests, policy segments
  std::unique_ptr<arena> vm;             // larger requests, policy arena
  pools::address_map<block> live;        // live blocks by address
  std::atomic<bool> recording{false};    // calls go to `record` (read without the lock)
  recorder record;                       // kept for the allocator's life: see recorder.hpp
  std::unordered_map<block*, std::vector<queue_id>> extra_uses;  // record_use
  std::vector<deferred_block> deferred;  // freed blocks waiting on other queues
  statistics stats;                      // the cheap counters
  std::size_t memory_limit = 0;
  std::size_t cache_limit = 0;
  std::size_t wired_limit = 0;
  std::size_t reserving = 0;        // bytes being allocated outside the lock
  std::size_t in_flight_bytes = 0;  // arena blocks placed, mapping outside the lock
  std::size_t in_flight_blocks = 0;
  // Small segments' arena blocks placed, mapping outside the lock (not active bytes).
  std::size_t in_flight_segments = 0;
  std::uint64_t free_serial = 0;    // frees so far
  std::uint64_t stamp_counter = 0;  // hand-outs so far: each live block's stamp
  bool validating = false;
  bool ordering_queues = false;                  // order_queues and the backend has queue_ordering
  bool small_in_arena = false;                   // small_segments_in_arena, and an arena page is
                                                 // a small segment's size
  bool thread_caching = true;                    // small frees park in per-thread caches
  std::size_t small_max = pools::kSmallRequest;  // largest request of the small pool
  const std::uint64_t id;                        // unique per allocator, for thread-local lookup
  std::vector<thread_cache*> caches;             // every thread's cache; guarded by the registry

  // Thread caches (allocator/thread_caches.cpp).
  thread_cache* get_thread_cache() {
    if (last_cache.id == id) return last_cache.cache;
    return get_thread_cache_slow();
  }
  thread_cache* get_thread_cache_slow();
  // Under the lock: folds every cache's counters into stats and gives its blocks
  // back to the pools. Returns the bytes that were parked.
  std::size_t flush_thread_caches_locked();
  std::size_t flush_thread_cache_locked(thread_cache& cache);  // returns the bytes parked
  std::size_t calculate_parked_locked(std::size_t* blocks = nullptr) const;
  // Under the lock, for a block leaving the shared counters: the requested bytes
  // they hold for it; a difference a thread cache keeps for it leaves that cache.
  std::size_t close_requested_account(block* b);
  // Without the lock: the block `cache` holds back, handed out for `bytes` when a
  // request of `size` on `queue` would get its size; otherwise freed in the arena
  // (then null).
  block* take_held_back(thread_cache& cache, std::size_t size, std::size_t bytes, queue_id queue,
                        address_t* address);
  // Without the lock: the block `cache` holds back, if any, freed in the arena (no
  // request has size 0).
  void free_held_back(thread_cache& cache) { take_held_back(cache, 0, 0, 0, nullptr); }
  // stats with every cache's counters added (under the lock).
  statistics get_statistics_locked() const;
  statistics get_statistics_locked_unlocked_caches() const;  // caches already locked
  void detach_thread_caches();
  struct cached_lookup {
    std::uint64_t id = 0;
    thread_cache* cache = nullptr;
  };
  static thread_local cached_lookup last_cache;
  struct thread_caches;  // a thread's caches (allocator/thread_caches.cpp)
  static thread_local thread_caches this_thread;

  // A live block by address; parked blocks (stamp 0) are not live to callers.
  block* find_live(address_t address) const {
    block* b = live.find(address);
    return b && b->stamp.load(std::memory_order_acquire) != 0 ? b : nullptr;
  }
  segment_pool& pool_for(std::size_t size) { return size <= small_max ? small : large; }
  segment_pool& owner_pool(const block* b) {
    return b->owner->small ? small : b->owner->virtual_range ? vm->pool_of(b) : large;
  }
  bool uses_arena(std::size_t size) const { return vm && size > small_max; }
  std::size_t segment_size_for(std::size_t size) const;

  // Cached memory to give back: whole idle segments and idle arena pages.
  struct released_memory {
    std::vector<released_segment> segments;
    std::vector<page_plan> pages;
  };
  allocation on_allocated(block* b, std::size_t bytes, bool hit);
  // `handed` receives the block, for the thread cache to remember. Each round chooses,
  // under the lock, what to do next (choose), and does it without the lock.
  allocation allocate_slow(std::size_t bytes, std::size_t size, queue_id queue, block** handed);
  // What a request has tried so far: each remedy once before the next.
  struct attempt {
    bool refreshed = false;      // learned which fences completed
    bool waited = false;         // waited for queued work
    bool flushed = false;        // gave the thread caches' parked blocks back
    bool backend_full = false;   // the device said no: the limit is what it holds
    bool trimmed = false;        // released past the slack: idle pages for the small pool, or
                                 // empty small segments for the arena
    bool ordered = false;        // this queue was ordered after the others' pending frees
    arena::loop_note loop_note;  // the loop plan sees the request once, however often retried
  };
  // What a round does outside the lock, chosen under it.
  struct choice {
    enum { grow, map_pages, release, refresh, order, wait, out_of_memory } what = grow;
    std::uint64_t wait_serial = 0;  // wait: for this queue's frees up to here (0: all its work)
    released_memory released;       // given back first, whatever the choice
    arena::request request;         // map_pages: the block placed and its pages
  };
  // A small segment on an arena block (small_in_arena); returns the block of `size`
  // carved from it for `queue`.
  block* make_small_segment(block* arena_block, std::size_t size, queue_id queue);
  // Under the lock: a block for the request, or else what to do next.
  block* choose(std::size_t size, std::size_t segment_size, queue_id queue, attempt& tried,
                choice& next);
  // For an arena block placed that needs pages mapped (or waits on pages being mapped).
  void choose_for_pages(queue_id queue, attempt& tried, choice& next);
  // Where no free place holds the request: fences, queue order, growth, release, waits.
  void choose_remedy(std::size_t size, std::size_t segment_size, queue_id queue, std::size_t used,
                     std::size_t shortfall, attempt& tried, choice& next);
  void flush_parked(attempt& tried, choice& next);
  // Without the lock: maps the request's pages; then, with `lock` taken, the block once
  // every page it shares is settled (the lock stays held), or null to place it again.
  block* map_and_settle(arena::request& request, attempt& tried,
                        std::unique_lock<std::mutex>& lock);
  // Under the lock: whether `queue` (not ordered yet in this request) could be
  // ordered after other queues' frees it may not reuse yet.
  bool may_order(bool ordered, queue_id queue) const;
  // Without the lock: makes `queue`'s later work wait, on the device, for the work
  // before every other queue's frees so far, so that it may reuse those blocks now.
  void order_after_other_queues(queue_id queue);
  // Whether to record a fence now (see arena::free): the pages it left idle can
  // then move without waiting for everything queued after this free.
  bool free_locked(block* b, address_t address);
  // Takes the lock: frees `known` (a block a thread cache gave up) or else the live
  // block at `address` (throws if none).
  void free_shared(address_t address, block* known);
  void refresh_fences();
  // Waits, without the lock, for the fences outstanding on `only` (every queue if
  // none given); returns whether there were any.
  bool wait_for_queued_work(std::optional<queue_id> only = std::nullopt);
  // Without the lock: a fence on `queue` for its frees up to `serial`. Called after a
  // free that left arena pages idle while pages move (arena::free), so that those
  // pages can move later without draining the queue.
  void record_fence(queue_id queue, std::uint64_t serial);
  // Waits, without the lock, until blocks freed on `queue` up to `serial` are safe:
  // on the oldest fence that covers them, so that the work queued after it keeps
  // the device busy (waiting on the newest would drain the queue).
  void wait_for_free_serial(queue_id queue, std::uint64_t serial);
  bool has_unsafe_blocks() const;
  std::size_t calculate_releasable() const;
  // Under the lock: takes cached memory out, least recently used first, until
  // reserved bytes are at most `target_reserved`.
  void release_until(std::size_t target_reserved, released_memory& out);
  // The same with empty segments only (no arena page).
  void release_segments_until(std::size_t target_reserved, released_memory& out);
  // Without the lock: hands it to the backend.
  void give_back(const released_memory& released);
  void trim_cache();
  void release_deferred_locked();
  void merge_unmerged_locked();  // blocks left apart by fence state, merged if now allowed
  void validate_locked() const;
  statistics recount_locked() const;
  statistics recount_locked_caches() const;  // the caches are locked already
  [[noreturn]] void throw_out_of_memory(std::size_t bytes, queue_id queue);

  // The arena's page counts into the statistics.
  void count_pages(const arena::page_counts& counts);
};

}  // namespace memkit

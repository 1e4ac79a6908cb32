// Per-thread caches of small free blocks in front of the shared pools.
//
// A thread cache parks blocks its thread frees and hands them back to the same
// thread without the allocator's lock. It also holds back the arena block its
// thread last freed, for that thread's next call only: a request of the same size
// takes it back (a free-allocate pair without the lock); any other call gives it
// to the arena first, so the arena sees the same frees in the same order, and the
// shared counters the same peaks, as without the cache. Parked and held-back blocks stay live in
// the pools' view; the cache keeps the difference in its own counters:
//   true active bytes    == stats.active_bytes    + sum(cache.active_delta)
//   true requested bytes == stats.requested_bytes + sum(cache.requested_delta)
//   sum(cache.active_delta) == -sum(parked and held-back bytes) <= 0
//   cache.requested_delta == sum over blocks it parked or handed out since its last
//     flush of (requested, 0 while parked) - counted_requested
// (a block the shared path frees takes its difference out of the cache that handed
// it out: state::close_requested_account; a flush folds them into the counters)
// so stats.peak_active_bytes, tracked on the shared counter, is an upper bound
// of the true peak, exact whenever the caches are empty. Flushing a cache (thread
// exit, pressure, clear_cache, reset_peak, limits) folds its counters into the
// shared ones and gives its blocks back to the pools.
//
// Locking: each cache has a spin lock its own thread takes on every call
// (uncontended) and other threads take only to flush it; the order is the
// allocator's mutex, then a cache's lock.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "placement/free_index.hpp"
#include "pools/segment_pool.hpp"

namespace memkit {

class alignas(64) thread_cache {
 public:
  static constexpr std::size_t kMaxBlock = pools::kSmallRequest;  // blocks it parks
  static constexpr std::size_t kMaxBytes = std::size_t{2} << 20;  // parked bytes at most
  static constexpr std::uint32_t kPerBin = 8;                     // blocks a bin holds
  static constexpr std::uint32_t kBins = placement::free_index::bin_of(kMaxBlock) + 1;
  static constexpr std::size_t kMaxHeldBack = std::size_t{1} << 20;  // arena block held back

  struct parked {
    pools::block* b = nullptr;
    address_t address = 0;  // the block's, so a hand-out need not read its segment
    queue_id queue = 0;
  };
  struct counters {
    std::int64_t active_delta = 0;  // bytes: minus those parked
    std::int64_t requested_delta = 0;
    std::uint64_t allocations = 0;  // served from the cache
    std::uint64_t frees = 0;        // parked
  };

  thread_cache(std::uint64_t allocator_id, std::uint64_t cache_number)
      : allocator_id_(allocator_id), cache_number_(cache_number) {}

  void lock() {
    while (lock_.test_and_set(std::memory_order_acquire)) {
    }
  }
  void unlock() { lock_.clear(std::memory_order_release); }

  // A parked block of at least `size` bytes for `queue`, wasting no more than
  // the pools' bound allows (caller holds the lock).
  pools::block* pop(std::size_t size, queue_id queue, address_t* address) {
    const std::uint32_t last =
        placement::free_index::bin_of(size + std::min(size / 2, pools::kSmallWaste));
    for (std::uint32_t bin = placement::free_index::bin_of(size); bin <= last && bin < kBins;
         ++bin) {
      std::uint32_t& n = count_[bin];
      if (n == 0) continue;
      const parked& top = bins_[bin][n - 1];
      pools::block* b = top.b;
      if (top.queue != queue || b->size < size || !pools::may_leave_unsplit(b->size, size, true))
        continue;
      --n;
      parked_bytes_ -= b->size;
      --parked_count_;
      *address = top.address;
      return b;
    }
    return nullptr;
  }

  // The counts of a block parked or held back (caller holds the lock).
  void count_parked(pools::block* b) {
    // One this cache handed out before its last flush: the counters hold its request.
    if (!is_open(b->stamp.load(std::memory_order_relaxed))) b->counted_requested = b->requested;
    stats.active_delta -= static_cast<std::int64_t>(b->size);
    stats.requested_delta -= static_cast<std::int64_t>(b->requested);
    stats.frees++;
    b->requested = 0;
    b->stamp.store(0, std::memory_order_release);  // parked: not live to anyone
  }
  // The counts of a parked block handed out again for `bytes` (caller holds the lock).
  void count_handed(pools::block* b, std::size_t bytes) {
    b->requested = bytes;
    b->stamp.store(next_stamp(), std::memory_order_release);
    stats.active_delta += static_cast<std::int64_t>(b->size);
    stats.requested_delta += static_cast<std::int64_t>(bytes);
    stats.allocations++;
  }

  // Whether a block is held back (read by the owning thread without the lock: only
  // it sets this; a flush may clear it meanwhile).
  bool is_holding_back() const { return holding_back_.load(std::memory_order_relaxed); }
  // Holds back an arena block this thread freed, if none is and it is small enough
  // (caller holds the lock).
  bool hold_back(pools::block* b, address_t address) {
    if (held_back_.b || b->size > kMaxHeldBack || !hold_gate_.is_trying()) return false;
    held_back_ = {b, address, b->queue};
    holding_back_.store(true, std::memory_order_relaxed);
    return true;
  }
  // The held-back block if a request of `size` on `queue` would get that size;
  // otherwise it comes out into *evicted, its park undone (live again, for the
  // caller to free in the arena: that free subtracts it from the shared counters),
  // or null (caller holds the lock).
  pools::block* take_held_back(std::size_t size, queue_id queue, address_t* address,
                               parked* evicted) {
    const parked out = held_back_;
    held_back_ = {};
    holding_back_.store(false, std::memory_order_relaxed);
    const bool taken = out.b && out.b->size == size && out.queue == queue;
    if (out.b) hold_gate_.count_try(taken);
    if (taken) {
      *address = out.address;
      return out.b;
    }
    if (out.b) {
      // Live again with the request the shared counters hold, for the caller's free.
      stats.active_delta += static_cast<std::int64_t>(out.b->size);
      stats.requested_delta += static_cast<std::int64_t>(out.b->counted_requested);
      out.b->requested = out.b->counted_requested;
      stats.frees--;
      *evicted = out;
    }
    return nullptr;
  }

  // Adaptive: a shortcut that served fewer than 1 in `min_hit_share` of its last
  // kTryWindow tries costs more than it saves, so its thread skips it for the next
  // kSkip chances, then tries again. Read and written by the owning thread only.
  static constexpr std::uint32_t kTryWindow = 256;
  static constexpr std::uint32_t kSkip = 4096;
  template <std::uint32_t min_hit_share>
  class try_gate {
   public:
    // Whether to try now; a chance skipped counts down the skip.
    bool is_worth_trying() {
      if (skip_left_ == 0) return true;
      --skip_left_;
      return false;
    }
    bool is_trying() const { return skip_left_ == 0; }
    void count_try(bool hit) {
      tries_hit_ += hit;
      if (++tries_ < kTryWindow) return;
      if (tries_hit_ * min_hit_share < kTryWindow) skip_left_ = kSkip;
      tries_ = tries_hit_ = 0;
    }

   private:
    std::uint32_t tries_ = 0;      // tries in this window
    std::uint32_t tries_hit_ = 0;  // of which served
    std::uint32_t skip_left_ = 0;  // chances left to skip
  };
  // The parked blocks (locks, two address maps) pay off from 1 hit in 4 tries.
  static constexpr std::uint32_t kMinHitShare = 4;
  bool is_worth_trying() { return parked_gate_.is_worth_trying(); }
  bool is_trying() const { return parked_gate_.is_trying(); }
  void count_try(bool hit) { parked_gate_.count_try(hit); }
  // Holding back arena blocks: skipped only where hardly any is taken back (1 in
  // kMinHoldShare), as in streams of random sizes; a held-back block taken back also
  // keeps the arena's layout as it was.
  static constexpr std::uint32_t kMinHoldShare = 64;
  bool is_worth_holding_back() { return hold_gate_.is_worth_trying(); }

  // A stamp no other hand-out has had: this cache's number in the high bits.
  std::uint64_t next_stamp() { return (cache_number_ << kStampBits) | ++stamps_; }
  static constexpr int kStampBits = 44;
  static std::uint64_t cache_number_of(std::uint64_t stamp) { return stamp >> kStampBits; }
  // The serial part of a stamp (the shared path's stamps are serials alone).
  static std::uint64_t serial_of(std::uint64_t stamp) {
    return stamp & ((std::uint64_t{1} << kStampBits) - 1);
  }
  std::uint64_t get_cache_number() const { return cache_number_; }
  // Whether a block with this stamp was handed out by this cache since its last
  // flush: its difference of requested bytes is still in requested_delta.
  bool is_open(std::uint64_t stamp) const {
    return cache_number_of(stamp) == cache_number_ && serial_of(stamp) > folded_stamps_;
  }
  // A flush folded the counters: every hand-out so far is closed.
  void note_folded() { folded_stamps_ = stamps_; }

  // Parks a block this thread freed; false when full (caller holds the lock).
  bool push(pools::block* b, address_t address) {
    const std::uint32_t bin = placement::free_index::bin_of(b->size);
    std::uint32_t& n = count_[bin];
    if (n == kPerBin || parked_bytes_ + b->size > kMaxBytes) return false;
    bins_[bin][n++] = {b, address, b->queue};
    parked_bytes_ += b->size;
    ++parked_count_;
    return true;
  }

  // Calls f(block) for every parked or held-back block (caller holds the lock).
  template <class F>
  void for_each_parked(F&& f) const {
    for (std::uint32_t bin = 0; bin < kBins; ++bin) {
      for (std::uint32_t i = 0; i < count_[bin]; ++i) f(bins_[bin][i].b);
    }
    if (held_back_.b) f(held_back_.b);
  }

  // Takes every parked block out (caller holds the lock).
  template <class F>
  void drain(F&& give_back) {
    for (std::uint32_t bin = 0; bin < kBins; ++bin) {
      for (std::uint32_t i = 0; i < count_[bin]; ++i) give_back(bins_[bin][i].b);
      count_[bin] = 0;
    }
    if (held_back_.b) give_back(held_back_.b);
    held_back_ = {};
    holding_back_.store(false, std::memory_order_relaxed);
    parked_bytes_ = 0;
    parked_count_ = 0;
  }

  // Blocks this thread holds, by address, with the stamp they were handed out with.
  void remember(address_t address, pools::block* b, std::uint64_t stamp);
  // The block at `address` if this thread holds it and nobody freed it since.
  pools::block* recall(address_t address);

  counters stats;  // guarded by the lock
  std::uint64_t get_allocator_id() const { return allocator_id_; }
  // Parked and held-back blocks (caller holds the lock).
  std::size_t get_parked_bytes() const {
    return parked_bytes_ + (held_back_.b ? held_back_.b->size : 0);
  }
  std::size_t get_parked_count() const { return parked_count_ + (held_back_.b ? 1 : 0); }
  void* owner = nullptr;  // the allocator state, null once it is gone

 private:
  struct held {
    address_t address = 0;
    pools::block* b = nullptr;
    std::uint64_t stamp = 0;
  };
  std::atomic_flag lock_ = ATOMIC_FLAG_INIT;
  std::uint64_t allocator_id_;
  std::uint64_t cache_number_;  // >= 1; the shared path's stamps use 0
  std::uint64_t stamps_ = 0;
  std::uint64_t folded_stamps_ = 0;        // hand-outs up to this stamp are folded
  try_gate<kMinHitShare> parked_gate_;     // allocations: whether to look at parked blocks
  try_gate<kMinHoldShare> hold_gate_;      // arena blocks handed out: whether to hold back
  std::size_t parked_bytes_ = 0;           // in the bins
  std::size_t parked_count_ = 0;           // in the bins
  parked held_back_;                       // the arena block held back, if any
  std::atomic<bool> holding_back_{false};  // held_back_.b != nullptr
  std::array<std::uint32_t, kBins> count_{};
  std::array<std::array<parked, kPerBin>, kBins> bins_{};
  std::vector<held> held_ = std::vector<held>(1024);  // open addressing, half full at most
  std::size_t held_count_ = 0;
};

// Holds every cache of a list locked for a scope.
class caches_locked {
 public:
  explicit caches_locked(const std::vector<thread_cache*>& caches) : caches_(caches) {
    for (thread_cache* c : caches_) c->lock();
  }
  ~caches_locked() {
    for (thread_cache* c : caches_) c->unlock();
  }
  caches_locked(const caches_locked&) = delete;
  caches_locked& operator=(const caches_locked&) = delete;

 private:
  const std::vector<thread_cache*>& caches_;
};

}  // namespace memkit

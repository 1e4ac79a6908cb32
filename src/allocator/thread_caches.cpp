// The registry of thread caches: creation on a thread's first call, flushing,
// and the two ends of their life (thread exit, allocator destruction).
#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>

#include "allocator/state.hpp"

namespace memkit {

namespace {

// Guards every cache's `owner` and every allocator's `caches` list, so that a
// thread exiting and an allocator being destroyed never race.
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

// A thread's caches, one per allocator it used; flushed when the thread exits.
struct allocator::state::thread_caches {
  std::vector<std::unique_ptr<thread_cache>> list;
  ~thread_caches() {
    std::lock_guard registry(registry_mutex());
    for (auto& cache : list) {
      if (!cache->owner) continue;
      auto* s = static_cast<state*>(cache->owner);
      std::lock_guard lock(s->mutex);
      s->flush_thread_cache_locked(*cache);
      s->caches.erase(std::find(s->caches.begin(), s->caches.end(), cache.get()));
    }
  }
};

thread_local allocator::state::thread_caches allocator::state::this_thread;
thread_local allocator::state::cached_lookup allocator::state::last_cache;

thread_cache* allocator::state::get_thread_cache_slow() {
  std::lock_guard registry(registry_mutex());
  auto& list = this_thread.list;
  // Caches of allocators that are gone hold nothing: drop them.
  std::erase_if(list, [](const std::unique_ptr<thread_cache>& c) { return !c->owner; });
  thread_cache* found = nullptr;
  for (auto& cache : list) {
    if (cache->get_allocator_id() == id) found = cache.get();
  }
  if (!found) {
    static std::atomic<std::uint64_t> caches_made{0};
    list.push_back(std::make_unique<thread_cache>(id, ++caches_made));
    found = list.back().get();
    found->owner = this;
    std::lock_guard lock(mutex);
    caches.push_back(found);
  }
  last_cache = {id, found};
  return found;
}

std::size_t allocator::state::flush_thread_cache_locked(thread_cache& cache) {
  cache.lock();
  const std::size_t parked = cache.get_parked_bytes();
  stats.active_bytes = static_cast<std::size_t>(static_cast<std::int64_t>(stats.active_bytes) +
                                                cache.stats.active_delta);
  stats.requested_bytes = static_cast<std::size_t>(
      static_cast<std::int64_t>(stats.requested_bytes) + cache.stats.requested_delta);
  stats.allocations += cache.stats.allocations;
  stats.cache_hits += cache.stats.allocations;
  stats.frees += cache.stats.frees;
  stats.live_blocks = stats.live_blocks + cache.stats.allocations - cache.stats.frees;
  cache.stats = {};
  cache.note_folded();
  cache.drain([&](block* b) {
    live.erase(b->owner->base + b->offset);
    const std::uint64_t serial = ++free_serial;
    fences.note_free(b->queue, serial);
    // A held-back arena block's idle pages get their fence from the next refresh.
    if (b->owner->virtual_range)
      vm->free(b, serial);
    else
      owner_pool(b).give_back(b, serial);
  });
  cache.unlock();
  stats.cached_bytes = stats.reserved_bytes - stats.active_bytes;
  return parked;
}

block* allocator::state::take_held_back(thread_cache& cache, std::size_t size, std::size_t bytes,
                                        queue_id queue, address_t* address) {
  thread_cache::parked evicted;
  address_t found = 0;
  cache.lock();
  block* b = cache.take_held_back(size, queue, &found, &evicted);
  if (b) cache.count_handed(b, bytes);
  cache.unlock();
  if (b) {
    *address = found;
    return b;
  }
  if (evicted.b) free_shared(evicted.address, evicted.b);
  return nullptr;
}

std::size_t allocator::state::close_requested_account(block* b) {
  const std::uint64_t stamp = b->stamp.load(std::memory_order_relaxed);
  const std::uint64_t number = thread_cache::cache_number_of(stamp);
  if (number == 0 || b->requested == b->counted_requested) return b->requested;
  for (thread_cache* cache : caches) {
    if (cache->get_cache_number() != number) continue;
    cache->lock();
    const bool open = cache->is_open(stamp);
    if (open) {
      cache->stats.requested_delta -=
          static_cast<std::int64_t>(b->requested) - static_cast<std::int64_t>(b->counted_requested);
    }
    cache->unlock();
    return open ? b->counted_requested : b->requested;
  }
  return b->requested;  // its cache is gone: flushed, so the counters hold the request
}

std::size_t allocator::state::flush_thread_caches_locked() {
  // `caches` changes only with the lock held too, so the lock suffices here.
  std::size_t parked = 0;
  for (thread_cache* cache : caches) parked += flush_thread_cache_locked(*cache);
  return parked;
}

std::size_t allocator::state::calculate_parked_locked(std::size_t* blocks) const {
  std::size_t parked = 0;
  if (blocks) *blocks = 0;
  for (thread_cache* cache : caches) {
    cache->lock();
    parked += cache->get_parked_bytes();
    if (blocks) *blocks += cache->get_parked_count();
    cache->unlock();
  }
  return parked;
}

statistics allocator::state::get_statistics_locked() const {
  const caches_locked guard(caches);
  return get_statistics_locked_unlocked_caches();
}

statistics allocator::state::get_statistics_locked_unlocked_caches() const {
  statistics total = stats;
  for (const thread_cache* cache : caches) {
    const thread_cache::counters& c = cache->stats;
    total.active_bytes =
        static_cast<std::size_t>(static_cast<std::int64_t>(total.active_bytes) + c.active_delta);
    total.requested_bytes = static_cast<std::size_t>(
        static_cast<std::int64_t>(total.requested_bytes) + c.requested_delta);
    total.allocations += c.allocations;
    total.cache_hits += c.allocations;
    total.frees += c.frees;
    total.live_blocks = total.live_blocks + c.allocations - c.frees;
  }
  total.cached_bytes = total.reserved_bytes - total.active_bytes;
  // A cache may hand a parked block to a larger request than it served before:
  // the peaks, kept on the shared counters, must still cover the present.
  total.peak_active_bytes = std::max(total.peak_active_bytes, total.active_bytes);
  total.peak_requested_bytes = std::max(total.peak_requested_bytes, total.requested_bytes);
  return total;
}

void allocator::state::detach_thread_caches() {
  std::lock_guard registry(registry_mutex());
  for (thread_cache* cache : caches) {
    cache->lock();
    cache->owner = nullptr;
    cache->unlock();
  }
  caches.clear();
}

}  // namespace memkit

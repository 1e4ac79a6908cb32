// The allocator's slow paths: what a request does when no free place holds it (rounds
// of a choice under the lock, carried out without it), fences and queue order, and
// giving cached memory back. Backend calls happen with the lock released. Design and
// invariants: include/memkit/allocator.hpp.
#include <algorithm>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "allocator/state.hpp"

namespace memkit {

allocation allocator::state::allocate_slow(std::size_t bytes, std::size_t size, queue_id queue,
                                           block** handed) {
  const std::size_t segment_size = uses_arena(size) ? 0 : segment_size_for(size);
  attempt tried;
  for (;;) {
    choice next;
    {
      std::unique_lock lock(mutex);
      if (block* b = choose(size, segment_size, queue, tried, next)) {
        *handed = b;
        return on_allocated(b, bytes, true);
      }
      if (next.what == choice::out_of_memory) {
        lock.unlock();
        throw_out_of_memory(bytes, queue);
      }
      if (next.what == choice::grow) reserving += segment_size;
    }
    give_back(next.released);
    switch (next.what) {
      case choice::release:
        continue;
      case choice::refresh:
        refresh_fences();
        tried.refreshed = true;
        continue;
      case choice::order:
        order_after_other_queues(queue);
        tried.ordered = true;
        continue;
      case choice::wait:
        // Past the slack, only the requesting queue's own work: never a wait on
        // another queue's progress.
        if (next.wait_serial > 0)
          wait_for_free_serial(queue, next.wait_serial);
        else
          wait_for_queued_work();
        tried.waited = true;
        continue;
      case choice::map_pages: {
        std::unique_lock lock(mutex, std::defer_lock);
        if (block* b = map_and_settle(next.request, tried, lock)) {  // the lock is held
          *handed = next.request.small_segment ? make_small_segment(b, size, queue) : b;
          return on_allocated(*handed, bytes, false);
        }
        continue;
      }
      case choice::grow: {
        const address_t base = device.allocate_segment(segment_size);
        std::lock_guard lock(mutex);
        reserving -= segment_size;
        if (base == 0) {
          tried.backend_full = true;
          continue;
        }
        stats.reserved_bytes += segment_size;
        stats.peak_reserved_bytes = std::max(stats.peak_reserved_bytes, stats.reserved_bytes);
        stats.backend_allocations++;
        stats.segments++;
        *handed = pool_for(size).add_segment(base, segment_size, size, queue);
        return on_allocated(*handed, bytes, false);
      }
      case choice::out_of_memory:  // thrown above
        break;
    }
  }
}

block* allocator::state::choose(std::size_t size, std::size_t segment_size, queue_id queue,
                                attempt& tried, choice& next) {
  const std::size_t used = stats.reserved_bytes + reserving;
  // When the device said no, the limit is what it holds now.
  const std::size_t limit = tried.backend_full ? std::min(memory_limit, used) : memory_limit;
  std::size_t shortfall = 0;
  const arena::budget room{limit, used, stats.peak_active_bytes};
  arena::request& request = next.request;
  // A request the arena placed: its block when every page is mapped already, else null
  // with the next step for its pages chosen.
  auto placed = [&]() -> block* {
    reserving += request.reserving;
    if (request.pages.empty() && !request.must_wait) {
      stats.returns += vm->commit_returns(request);
      return request.b;
    }
    choose_for_pages(queue, tried, next);
    return nullptr;
  };
  if (uses_arena(size)) {
    if (vm->take(size, queue, room, tried.loop_note, request)) return placed();
    shortfall = request.shortfall;
  } else {
    if (block* b = pool_for(size).take(size, queue)) return b;
    // The small segment is a page of the arena (see allocator_options).
    if (small_in_arena && size <= small_max && vm->take_small_segment(queue, room, request)) {
      block* arena_block = placed();
      return arena_block ? make_small_segment(arena_block, size, queue) : nullptr;
    }
    shortfall = used + segment_size > limit ? used + segment_size - limit : 0;
  }
  choose_remedy(size, segment_size, queue, used, shortfall, tried, next);
  return nullptr;
}

void allocator::state::choose_for_pages(queue_id queue, attempt& tried, choice& next) {
  arena::request& request = next.request;
  auto abandon = [&] {
    reserving -= request.reserving;
    vm->abandon(request);
  };
  if (!request.pages.empty() && !tried.refreshed && has_unsafe_blocks()) {
    // Completed fences may free a mapped range: learn them before mapping.
    abandon();
    next.what = choice::refresh;
  } else if (request.past_slack > 0 && !tried.flushed && calculate_parked_locked() > 0) {
    // Small blocks parked in thread caches may hold small segments that are
    // otherwise empty: give them back, so that trimming can release those.
    abandon();
    flush_parked(tried, next);
  } else if (request.past_slack > 0 && !tried.trimmed && small.get_releasable()) {
    // Empty small segments are cache: give them back before moving pages or
    // growing past the slack.
    tried.trimmed = true;
    abandon();
    release_segments_until(
        stats.reserved_bytes -
            std::min(stats.reserved_bytes, request.past_slack * vm->get_page_size()),
        next.released);
    next.what = choice::release;
  } else if (std::uint64_t serial = 0;
             request.past_slack > 0 && !tried.waited && !request.wait_would_help &&
             (serial = small.calculate_wait_serial(
                  queue,
                  common::round_up(request.past_slack * vm->get_page_size(), pools::kSmallSegment) /
                      pools::kSmallSegment)) > 0) {
    // Empty small segments that only wait for this queue's work: wait once for it,
    // then give them back rather than grow past the slack.
    abandon();
    tried.trimmed = false;
    next.wait_serial = serial;
    next.what = choice::wait;
    stats.retries++;
  } else if (request.past_slack > 0 && may_order(tried.ordered, queue)) {
    // Blocks other queues freed, still pending there, are reusable at once
    // once this queue's work waits for theirs on the device.
    abandon();
    next.what = choice::order;
  } else if (request.wait_would_help && !tried.waited) {
    // Growing past the slack while idle pages only wait for this queue's
    // earlier work: wait for it once rather than hold more memory.
    next.wait_serial = request.wait_serial;
    abandon();
    next.what = choice::wait;
    stats.retries++;
  } else {
    next.what = choice::map_pages;
    if (request.small_segment) {
      in_flight_segments++;  // its bytes are the small blocks', counted when carved
    } else {
      in_flight_bytes += request.b->size;  // live in the range, not yet handed out
      in_flight_blocks++;
    }
  }
}

void allocator::state::choose_remedy(std::size_t size, std::size_t segment_size, queue_id queue,
                                     std::size_t used, std::size_t shortfall, attempt& tried,
                                     choice& next) {
  const bool in_arena = uses_arena(size);
  if (!tried.refreshed && has_unsafe_blocks()) {
    // Polling fences costs far less than new memory: learn what completed first.
    next.what = choice::refresh;
  } else if (may_order(tried.ordered, queue)) {
    // So does ordering this queue after the others' pending frees.
    next.what = choice::order;
  } else if (!in_arena && shortfall == 0) {
    next.what = choice::grow;
    // Beside an arena the small pool grows within the arena's slack too: idle
    // pages past it go back first (a release, no page moves).
    const std::size_t room = vm ? vm->get_growth_room(stats.peak_active_bytes) : 0;
    if (vm && !tried.flushed && used + segment_size > room && calculate_parked_locked() > 0) {
      // Blocks parked in thread caches may hold the room a new segment would add.
      flush_parked(tried, next);
    } else if (vm && !tried.trimmed && used + segment_size > room) {
      const std::size_t over = used + segment_size - room;
      release_until(stats.reserved_bytes - std::min(stats.reserved_bytes, over), next.released);
      if (!next.released.pages.empty() || !next.released.segments.empty()) {
        tried.trimmed = true;
        next.what = choice::release;
      } else if (!tried.waited && (next.wait_serial = vm->calculate_wait_serial(
                                       queue, common::round_up(over, vm->get_page_size()) /
                                                  vm->get_page_size())) > 0) {
        // As the arena does past the slack: wait once for this queue's work that
        // holds idle pages, then release them.
        next.what = choice::wait;
        stats.retries++;
      } else {
        tried.trimmed = true;
      }
    }
  } else if (const std::size_t releasable = calculate_releasable();
             releasable > 0 && (tried.backend_full || releasable >= shortfall)) {
    release_until(tried.backend_full ? 0 : stats.reserved_bytes - shortfall, next.released);
    tried.backend_full = false;
    next.what = choice::release;
  } else if (!tried.flushed && calculate_parked_locked() > 0) {
    // Blocks parked in thread caches count too: give them back, then retry.
    flush_parked(tried, next);
  } else if (!tried.waited && has_unsafe_blocks()) {
    next.what = choice::wait;
    stats.retries++;
  } else {
    next.what = choice::out_of_memory;
  }
}

block* allocator::state::make_small_segment(block* arena_block, std::size_t size, queue_id queue) {
  // The arena block's bytes are not active: the small blocks carved from it are.
  const address_t base = arena_block->owner->base + arena_block->offset;
  block* b = small.add_segment(base, arena_block->size, size, queue);
  b->owner->arena_block = arena_block;
  stats.segments++;
  return b;
}

void allocator::state::flush_parked(attempt& tried, choice& next) {
  // Blocks parked in thread caches go back (once a request), then it retries.
  tried.flushed = true;
  flush_thread_caches_locked();
  next.what = choice::release;
}

block* allocator::state::map_and_settle(arena::request& request, attempt& tried,
                                        std::unique_lock<std::mutex>& lock) {
  const bool mapped = vm->map(request);
  std::vector<page_plan> to_release;
  lock.lock();
  block* b = request.b;
  auto landed = [&] {
    if (request.small_segment) {
      in_flight_segments--;
      return;
    }
    in_flight_bytes -= b->size;
    in_flight_blocks--;
  };
  if (!mapped) landed();
  reserving -= request.reserving;
  count_pages(vm->finish(request, mapped, to_release));
  pages_mapped.notify_all();
  if (!mapped) {
    lock.unlock();
    vm->give_back(to_release);
    tried.backend_full = true;
    return nullptr;
  }
  pages_mapped.wait(lock, [&] { return vm->is_settled(b); });
  landed();
  if (!vm->is_mapped(b)) {
    // Another thread's mapping of a page this block shares failed: give the
    // block back (its own pages stay mapped, idle) and place it again.
    vm->cancel(request);
    return nullptr;
  }
  return b;
}

void allocator::state::throw_out_of_memory(std::size_t bytes, queue_id queue) {
  out_of_memory::details d;
  {
    std::lock_guard lock(mutex);
    stats.out_of_memory++;
    d.requested_bytes = bytes;
    d.active_bytes = stats.active_bytes;
    d.cached_bytes = stats.reserved_bytes - stats.active_bytes;
    d.reserved_bytes = stats.reserved_bytes;
    d.limit_bytes = memory_limit;
    d.largest_free_bytes = std::max(small.calculate_largest_free(), large.calculate_largest_free());
  }
  throw out_of_memory(
      "[memkit::allocate] out of memory: requested " + std::to_string(bytes) + " bytes on queue " +
          std::to_string(queue) + "; live " + std::to_string(d.active_bytes) + ", cached " +
          std::to_string(d.cached_bytes) + ", reserved " + std::to_string(d.reserved_bytes) +
          ", limit " + std::to_string(d.limit_bytes) + ", largest free block " +
          std::to_string(d.largest_free_bytes) + " bytes",
      d);
}

bool allocator::state::has_unsafe_blocks() const {
  return !deferred.empty() || fences.has_unsafe_frees();
}

// Records a fence on every queue with blocks not yet safe, polls every queue with
// outstanding fences, and makes safe what completed.
void allocator::state::refresh_fences() {
  fence_tracker::refresh_plan plan;
  {
    std::lock_guard lock(mutex);
    plan = fences.plan_refresh(free_serial);
  }
  if (plan.poll.empty()) return;
  std::vector<std::uint64_t> submitted(plan.record.size());
  for (std::size_t i = 0; i < plan.record.size(); ++i) {
    submitted[i] = device.get_submitted(plan.record[i]);
  }
  std::vector<std::uint64_t> completed(plan.poll.size());
  for (std::size_t i = 0; i < plan.poll.size(); ++i)
    completed[i] = device.get_completed(plan.poll[i]);

  std::lock_guard lock(mutex);
  if (fences.apply_refresh(plan, submitted, completed)) {
    release_deferred_locked();
    merge_unmerged_locked();
    if (validating) validate_locked();
  }
}

bool allocator::state::may_order(bool ordered, queue_id queue) const {
  return !ordered && ordering_queues && !fences.find_unordered(queue).empty();
}

void allocator::state::order_after_other_queues(queue_id queue) {
  std::vector<queue_id> others;
  std::vector<std::uint64_t> frees;  // each one's frees so far
  {
    std::lock_guard lock(mutex);
    others = fences.find_unordered(queue);
    for (queue_id q : others) frees.push_back(fences.get_last_free_serial(q));
  }
  // A fence on each other queue now covers its frees so far (their work was
  // submitted before them); this queue's later work waits for it.
  std::vector<std::uint64_t> values(others.size());
  std::vector<char> waits(others.size());
  for (std::size_t i = 0; i < others.size(); ++i) {
    values[i] = device.get_submitted(others[i]);
    waits[i] = device.order_after(queue, {others[i], values[i]});
  }
  std::lock_guard lock(mutex);
  for (std::size_t i = 0; i < others.size(); ++i) {
    fences.record(others[i], frees[i], values[i]);
    if (!waits[i]) continue;
    fences.note_ordered(queue, others[i], frees[i]);
    stats.queue_orders++;
  }
  if (validating) validate_locked();
}

void allocator::state::merge_unmerged_locked() {
  small.merge_unmerged();
  large.merge_unmerged();
  if (vm) vm->merge_unmerged();
}

bool allocator::state::wait_for_queued_work(std::optional<queue_id> only) {
  refresh_fences();
  std::vector<fence> newest;
  {
    std::lock_guard lock(mutex);
    newest = fences.get_newest(only);
  }
  for (const fence& f : newest) device.wait(f);
  refresh_fences();
  return !newest.empty();
}

void allocator::state::record_fence(queue_id queue, std::uint64_t serial) {
  const std::uint64_t value = device.get_submitted(queue);  // after the free: covers it
  std::lock_guard lock(mutex);
  fences.record(queue, serial, value);
}

void allocator::state::wait_for_free_serial(queue_id queue, std::uint64_t serial) {
  refresh_fences();  // records a fence covering every free so far
  std::optional<fence> oldest;
  {
    std::lock_guard lock(mutex);
    oldest = fences.find_covering(queue, serial);
  }
  if (oldest) device.wait(*oldest);
  refresh_fences();
}

void allocator::state::count_pages(const arena::page_counts& counts) {
  const std::size_t g = vm->get_page_size();
  stats.maps += counts.mapped;
  stats.unmaps += counts.unmapped;
  stats.moves += counts.moved;
  stats.returns += counts.returned;
  stats.backend_allocations += counts.allocations;
  stats.backend_frees += counts.frees;
  stats.reserved_bytes = stats.reserved_bytes + counts.created * g - counts.released * g;
  stats.peak_reserved_bytes = std::max(stats.peak_reserved_bytes, stats.reserved_bytes);
  stats.cached_bytes = stats.reserved_bytes - stats.active_bytes;
}

void allocator::state::release_deferred_locked() {
  auto safe = [&](const deferred_block& d) {
    return std::all_of(d.queues.begin(), d.queues.end(),
                       [&](queue_id q) { return fences.is_safe(q, d.serial); });
  };
  for (auto it = deferred.begin(); it != deferred.end();) {
    if (safe(*it)) {
      block* b = it->b;
      if (b->owner->virtual_range)
        vm->free(b, 0);
      else
        owner_pool(b).release_deferred(b);
      it = deferred.erase(it);
    } else {
      ++it;
    }
  }
}

std::size_t allocator::state::calculate_releasable() const {
  return (vm ? vm->calculate_releasable() : 0) + small.calculate_releasable() +
         large.calculate_releasable();
}

void allocator::state::release_until(std::size_t target_reserved, released_memory& out) {
  release_segments_until(target_reserved, out);
  if (vm && stats.reserved_bytes > target_reserved) {
    count_pages(vm->release_idle(stats.reserved_bytes - target_reserved, out.pages));
  }
  stats.cached_bytes = stats.reserved_bytes - stats.active_bytes;
  if (validating) validate_locked();
}

void allocator::state::release_segments_until(std::size_t target_reserved, released_memory& out) {
  while (stats.reserved_bytes > target_reserved) {
    segment_pool* pool = &large;
    segment* seg = large.get_releasable();
    if (!seg) {
      pool = &small;
      seg = small.get_releasable();
    }
    if (!seg) break;
    if (seg->arena_block) {
      block* ab = seg->arena_block;
      const serial_t serial = seg->first->free_serial;
      const queue_id q = seg->first->queue;
      stats.segments--;
      pool->remove_segment(seg);
      ab->queue = q;
      vm->free(ab, serial);
      continue;
    }
    out.segments.push_back({seg->base, seg->size});
    stats.reserved_bytes -= seg->size;
    stats.backend_frees++;
    stats.segments--;
    pool->remove_segment(seg);
  }
  stats.cached_bytes = stats.reserved_bytes - stats.active_bytes;
}

void allocator::state::give_back(const released_memory& released) {
  for (const released_segment& r : released.segments) device.free_segment(r.base, r.size);
  if (!vm || released.pages.empty()) return;
  vm->give_back(released.pages);
  {
    std::lock_guard lock(mutex);
    vm->settle_released(released.pages);
  }
  pages_mapped.notify_all();  // requests waiting for those pages place their blocks again
}

void allocator::state::trim_cache() {
  refresh_fences();
  released_memory released;
  {
    std::lock_guard lock(mutex);
    flush_thread_caches_locked();
    if (stats.cached_bytes > cache_limit) {
      release_until(stats.active_bytes + cache_limit, released);
    }
  }
  give_back(released);
}

}  // namespace memkit

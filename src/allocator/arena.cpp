// The virtual-memory arena: large blocks in one reserved address range, physical
// pages mapped only under live blocks. See vm_arena in allocator/state.hpp.
#include <algorithm>
#include <limits>

#include "allocator/state.hpp"

namespace memkit {

namespace {
using placement::page_map;

// Free ranges examined for one whose pages are all mapped, before best fit. With
// no slack only ranges near the request's size: a much larger one would be split
// and leave partly used pages behind. With slack, memory is traded for map calls:
// any mapped range, among more of them.
constexpr int kMappedCandidates = 16;
constexpr int kMappedCandidatesWithSlack = 256;
constexpr std::size_t kNearFit = 8;  // "near": within 1/8 of the request
// Work, at most, looking for mapped pages inside free ranges (bitmap words read).
constexpr std::size_t kWindowPageScan = 4096;
// Frees that record a fence after pages moved or a request waited for them: while
// pages move, a wait for some of them need not wait for all the work queued since.
constexpr std::uint32_t kFencesAfterMoves = 4096;

std::uint32_t page_of(std::size_t offset, std::size_t page_size) {
  return static_cast<std::uint32_t>(offset / page_size);
}

// With slack, when no free range has mapped pages where a block would be cut from
// it: the place inside a free range whose pages are most mapped, among the first
// few ranges (a place with all pages mapped ends the search). Freed ranges merge,
// so mapped pages often sit inside a larger free range; each page found mapped
// there is one map call (or move) saved. Within a range the best place starts at
// the range's start, where a run of mapped pages starts, or ends at the range's
// end: sliding any other place towards one of those never unmaps a page under it.
block* take_most_mapped(vm_arena& a, std::size_t size, queue_id queue, queue_id* previous_queue) {
  const std::size_t g = a.page_size;
  if (a.pages.get_count() == 0) return nullptr;
  const block* best = nullptr;
  std::uint64_t best_start = 0;
  std::uint64_t best_need = std::numeric_limits<std::uint64_t>::max();  // unmapped pages
  std::uint64_t best_pages = 0;                                         // pages under it
  std::size_t budget = kWindowPageScan;  // bitmap words and run starts examined
  int ranges = 0;
  a.range.visit_usable(size, queue, [&](const block* range) {
    if (++ranges > kMappedCandidatesWithSlack) return true;
    auto consider = [&](std::uint64_t start) {
      const std::uint64_t first = start / g;
      const std::uint64_t last = (start + size - 1) / g;
      const std::uint64_t need = last - first + 1 - a.pages.count_usable(first, last);
      budget -= std::min<std::size_t>(budget, (last - first) / 64 + 1);
      if (need < best_need) {
        best = range;
        best_start = start;
        best_need = need;
        best_pages = last - first + 1;
      }
    };
    const std::uint64_t latest = range->offset + range->size - size;  // the highest start
    consider(range->offset);
    const std::uint64_t last_start_page = std::min<std::uint64_t>(latest / g, a.pages.get_count());
    for (std::uint64_t page = range->offset / g + 1;
         page <= last_start_page && best_need > 0 && budget > 0; ++page) {
      const std::uint64_t found = a.pages.find_run_start(page, last_start_page);
      const std::uint64_t scanned = (found == page_map::kNoPage ? last_start_page : found) - page;
      budget -= std::min<std::size_t>(budget, scanned / 64 + 1);
      if (found == page_map::kNoPage) break;
      page = found;
      consider(page * g);
    }
    if (best_need > 0 && latest > range->offset) consider(latest);
    return budget == 0 || best_need == 0;
  });
  if (!best || best_need == best_pages) return nullptr;  // nothing mapped: plain best fit
  return a.range.take_at(best, best_start, size, queue, previous_queue);
}
}  // namespace

void allocator::state::create_arena() {
  const std::size_t g = std::max<std::size_t>(facts.granularity, 1);
  // Eight times the device's memory in addresses: fragmentation in addresses is
  // free as long as a large block still finds a contiguous range.
  std::size_t bytes = round_up(8 * facts.capacity, g);
  address_t base = 0;
  while (bytes >= g && (base = device.reserve_range(bytes)) == 0) bytes = round_up(bytes / 2, g);
  if (base == 0) return;  // no addresses: large blocks use segments
  arena = std::make_unique<vm_arena>(safe_serial.data());
  arena->base = base;
  arena->size = bytes;
  arena->page_size = g;
  arena->range.add_free_segment(base, bytes);
  arena->range.set_page_size(g);
  // Pages follow the layout: one that repeats step after step, whenever fences
  // complete, needs no page moved. Only while one queue uses the arena: another
  // queue must not find free memory joined to ranges still pending on the first.
  arena->range.set_merge_by_queue(true);
  arena->fences_wanted = kFencesAfterMoves;  // the first steps, before any page moved
}

void allocator::state::destroy_arena() {
  const std::size_t g = arena->page_size;
  for (std::uint32_t i = 0; i < arena->pages.get_count(); ++i) {
    const page_map::page& p = arena->pages.get(i);
    if (!p.physical) continue;
    device.unmap(arena->base + i * g, g);
    device.release_page(p.physical, g);
  }
  device.release_range(arena->base, arena->size);
  arena.reset();
}

bool allocator::state::arena_take(std::size_t size, queue_id queue, std::size_t limit,
                                  arena_request& r) {
  vm_arena& a = *arena;
  const std::size_t g = a.page_size;
  if (!a.placed_any) {
    a.placed_any = true;
    a.sole_queue = queue;
  } else if (a.only_one_queue && queue != a.sole_queue) {
    a.only_one_queue = false;
    a.range.set_merge_by_queue(false);
  }
  // First choice: a free range whose pages are all mapped already where the block
  // would be cut, among the first few that fit; it costs no map call. With slack,
  // then the most-mapped place inside a free range. Otherwise best fit.
  const bool near_only = arena_slack <= 0.0;
  const int max_candidates = near_only ? kMappedCandidates : kMappedCandidatesWithSlack;
  int candidates = 0;
  block* b = a.range.take_where(
      size, queue,
      [&](const block* free_range, std::size_t start) {
        if (++candidates > max_candidates ||
            (near_only && free_range->size > size + size / kNearFit))
          return false;
        const std::uint32_t last_page = page_of(start + size - 1, g);
        if (last_page >= a.pages.get_count()) return false;
        for (std::uint32_t i = page_of(start, g); i <= last_page; ++i) {
          if (!a.pages.get(i).physical) return false;
        }
        return true;
      },
      &r.previous_queue);
  if (!b && !near_only) b = take_most_mapped(a, size, queue, &r.previous_queue);
  if (!b) b = a.range.take(size, queue, &r.previous_queue);
  if (!b) {
    r.shortfall = std::numeric_limits<std::size_t>::max();  // no addresses left
    return false;
  }
  const std::uint32_t first = page_of(b->offset, g);
  const std::uint32_t last = page_of(b->offset + b->size - 1, g);
  std::size_t need = 0;
  for (std::uint32_t i = first; i <= last; ++i) {
    const page_map::page& p = a.pages.at(i);
    if (p.busy)
      r.must_wait = true;
    else if (!p.physical)
      ++need;
  }
  // Idle pages elsewhere, least recently used first, that this queue may take,
  // for the pages that new ones cannot give within the slack over the peak in
  // use: every stolen page is an unmap now and likely a map again later.
  std::vector<std::uint32_t> stolen;
  const std::size_t growth_room =
      static_cast<std::size_t>(static_cast<double>(stats.peak_active_bytes) * (1.0 + arena_slack));
  const std::size_t in_use = stats.reserved_bytes + reserving;
  const std::size_t room_pages = growth_room > in_use ? (growth_room - in_use) / g : 0;
  const std::size_t to_steal = need > room_pages ? need - room_pages : 0;
  // Idle pages that could move once this queue's work completes, oldest first; the
  // serial of the free that makes enough of them movable.
  std::vector<std::uint64_t> waiting;
  for (std::uint32_t j = a.pages.get_idle_tail(); j != page_map::kNone && stolen.size() < to_steal;
       j = a.pages.get(j).prev_idle) {
    const page_map::page& p = a.pages.get(j);
    if (j >= first && j <= last) continue;
    // Unmapping is not ordered on any queue: the work that used the page must be
    // complete, even on this very queue.
    if (p.free_serial <= safe_serial[p.queue])
      stolen.push_back(j);
    else if (p.queue == queue)
      waiting.push_back(p.free_serial);
  }
  const std::size_t creates = need - stolen.size();
  r.wait_would_help = creates > room_pages && !waiting.empty();
  if (!stolen.empty() || r.wait_would_help) a.fences_wanted = kFencesAfterMoves;
  if (r.wait_would_help) {
    const std::size_t wanted = std::min(creates - room_pages, waiting.size());
    std::nth_element(waiting.begin(), waiting.begin() + (wanted - 1), waiting.end());
    r.wait_serial = waiting[wanted - 1];
  }
  if (in_use + creates * g > limit) {
    r.shortfall = in_use + creates * g - limit;
    b->queue = r.previous_queue;
    a.range.give_back(b, b->free_serial);
    return false;
  }
  r.b = b;
  r.creates = creates;
  std::size_t k = 0;
  for (std::uint32_t i = first; i <= last; ++i) {
    page_map::page& p = a.pages.at(i);
    const bool needs_page = !p.physical && !p.busy;
    // Only a request that maps or waits can be cancelled.
    if ((need > 0 || r.must_wait) && p.users == 0 && p.physical)
      r.was_idle.push_back({i, p.queue, p.free_serial});
    a.pages.add_user(i);
    if (!needs_page) continue;
    a.pages.set_busy(i, true);
    page_plan plan{i, 0, page_map::kNone};
    if (k < stolen.size()) {
      const std::uint32_t j = stolen[k++];
      page_map::page& victim = a.pages.at(j);
      plan.physical = victim.physical;
      plan.stolen_from = j;
      a.pages.unlink_idle(j);
      a.pages.set_physical(j, 0);
      a.mapped_pages--;
      a.held_unmapped++;
    }
    r.pages.push_back(plan);
  }
  reserving += creates * g;
  return true;
}

bool allocator::state::arena_map(arena_request& r) {
  const std::size_t g = arena->page_size;
  const address_t base = arena->base;
  std::size_t unmapped = 0;  // pages of the plan whose stolen page is unmapped so far
  std::size_t mapped = 0;    // pages of the plan mapped so far
  try {
    for (const page_plan& p : r.pages) {
      if (p.stolen_from != page_map::kNone) device.unmap(base + p.stolen_from * g, g);
      ++unmapped;
    }
    for (page_plan& p : r.pages) {
      if (p.physical) continue;
      p.physical = device.create_page(g);
      if (!p.physical) return false;
    }
    std::size_t run_start = 0;
    for (std::size_t k = 0; k < r.pages.size(); ++k) {
      device.map(base + r.pages[k].index * g, r.pages[k].physical, g);
      ++mapped;
      const bool run_ends = k + 1 == r.pages.size() || r.pages[k + 1].index != r.pages[k].index + 1;
      if (run_ends) {
        device.set_access(base + r.pages[run_start].index * g,
                          (r.pages[k].index - r.pages[run_start].index + 1) * g);
        run_start = k + 1;
      }
    }
    return true;
  } catch (const std::exception&) {
    // A backend call failed outright: undo the mappings made, so that the pages
    // in hand can be released and the request fails cleanly.
    auto try_unmap = [&](address_t at) {
      try {
        device.unmap(at, g);
      } catch (const std::exception&) {
      }
    };
    for (std::size_t k = 0; k < mapped; ++k) try_unmap(base + r.pages[k].index * g);
    for (std::size_t k = unmapped; k < r.pages.size(); ++k) {
      if (r.pages[k].stolen_from != page_map::kNone) try_unmap(base + r.pages[k].stolen_from * g);
    }
    return false;
  }
}

void allocator::state::arena_finish(arena_request& r, bool mapped,
                                    std::vector<page_plan>& to_release) {
  vm_arena& a = *arena;
  const std::size_t g = a.page_size;
  reserving -= r.creates * g;
  std::size_t stolen = 0;
  std::size_t created = 0;
  for (const page_plan& p : r.pages) {
    if (p.stolen_from != page_map::kNone)
      ++stolen;
    else if (p.physical)
      ++created;
  }
  a.held_unmapped -= stolen;
  stats.unmaps += stolen;
  if (mapped) {
    for (const page_plan& p : r.pages) {
      a.pages.set_physical(p.index, p.physical);
      a.pages.set_busy(p.index, false);
    }
    a.mapped_pages += r.pages.size();
    stats.maps += r.pages.size();
    stats.backend_allocations += created;
    stats.reserved_bytes += created * g;
    stats.peak_reserved_bytes = std::max(stats.peak_reserved_bytes, stats.reserved_bytes);
  } else {
    // The pages already in hand (stolen, or created before the backend ran out)
    // go back to the device: the caller releases them without the lock.
    stats.reserved_bytes -= stolen * g;
    stats.backend_allocations += created;  // made, never used, given back at once
    stats.backend_frees += stolen + created;
    for (const page_plan& p : r.pages) {
      a.pages.set_busy(p.index, false);
      if (p.physical) to_release.push_back({p.index, p.physical, page_map::kNone});
    }
    arena_cancel(r);
  }
  stats.cached_bytes = stats.reserved_bytes - stats.active_bytes;
  pages_mapped.notify_all();
}

void allocator::state::arena_cancel(arena_request& r) {
  vm_arena& a = *arena;
  const std::size_t g = a.page_size;
  block* b = r.b;
  const std::uint32_t first = page_of(b->offset, g);
  const std::uint32_t last = page_of(b->offset + b->size - 1, g);
  b->queue = r.previous_queue;
  const std::uint64_t serial = b->free_serial;
  a.range.give_back(b, serial);
  for (std::uint32_t i = first; i <= last; ++i) a.pages.remove_user(i, r.previous_queue, serial);
  for (const arena_request::idle_page& was : r.was_idle) {
    page_map::page& p = a.pages.at(was.index);
    if (p.users > 0 || !p.physical) continue;
    p.queue = was.queue;
    p.free_serial = was.free_serial;
  }
  r.was_idle.clear();
  r.b = nullptr;
}

void allocator::state::arena_abandon(arena_request& r) {
  vm_arena& a = *arena;
  reserving -= r.creates * a.page_size;
  for (const page_plan& p : r.pages) {
    a.pages.set_busy(p.index, false);
    if (p.stolen_from == page_map::kNone) continue;
    a.pages.set_physical(p.stolen_from, p.physical);
    a.pages.link_idle(p.stolen_from);
    a.mapped_pages++;
    a.held_unmapped--;
  }
  arena_cancel(r);
}

bool allocator::state::arena_free(block* b, std::uint64_t serial) {
  vm_arena& a = *arena;
  const std::size_t g = a.page_size;
  const std::uint32_t first = page_of(b->offset, g);
  const std::uint32_t last = page_of(b->offset + b->size - 1, g);
  const queue_id queue = b->queue;
  if (b->deferred)
    a.range.release_deferred(b);
  else
    a.range.give_back(b, serial);
  bool idled = false;
  for (std::uint32_t i = first; i <= last; ++i) idled |= a.pages.remove_user(i, queue, serial);
  if (!idled || a.fences_wanted == 0) return false;
  a.fences_wanted--;
  return true;
}

std::size_t allocator::state::calculate_arena_releasable() const {
  if (!arena) return 0;
  std::size_t pages = 0;
  for (std::uint32_t j = arena->pages.get_idle_tail(); j != page_map::kNone;
       j = arena->pages.get(j).prev_idle) {
    const page_map::page& p = arena->pages.get(j);
    if (p.free_serial <= safe_serial[p.queue]) ++pages;
  }
  return pages * arena->page_size;
}

void allocator::state::release_idle_pages(std::size_t target_reserved,
                                          std::vector<page_plan>& out) {
  if (!arena) return;
  vm_arena& a = *arena;
  const std::size_t g = a.page_size;
  for (std::uint32_t j = a.pages.get_idle_tail();
       j != page_map::kNone && stats.reserved_bytes > target_reserved;) {
    page_map::page& p = a.pages.at(j);
    const std::uint32_t newer = p.prev_idle;
    if (p.free_serial <= safe_serial[p.queue]) {
      out.push_back({j, p.physical, j});
      a.pages.unlink_idle(j);
      a.pages.set_physical(j, 0);
      a.mapped_pages--;
      stats.reserved_bytes -= g;
      stats.backend_frees++;
      stats.unmaps++;
    }
    j = newer;
  }
  stats.cached_bytes = stats.reserved_bytes - stats.active_bytes;
}

void allocator::state::give_back_pages(const std::vector<page_plan>& pages) {
  if (pages.empty()) return;
  const std::size_t g = arena->page_size;
  for (const page_plan& p : pages) {
    if (p.stolen_from != page_map::kNone) device.unmap(arena->base + p.stolen_from * g, g);
    device.release_page(p.physical, g);
  }
}

void allocator::state::validate_arena_locked() const {
  if (!arena) return;
  const vm_arena& a = *arena;
  const std::size_t g = a.page_size;
  auto check = [](bool ok, const char* what) {
    if (!ok) throw invariant_violation(std::string("[memkit::validate] arena: ") + what);
  };
  std::vector<std::uint32_t> users(a.pages.get_count(), 0);
  for (const block* b = a.range.get_segments().front()->first; b;
       b = static_cast<const block*>(b->next_range)) {
    if (!b->live && !b->deferred) continue;
    const std::uint32_t first = page_of(b->offset, g);
    const std::uint32_t last = page_of(b->offset + b->size - 1, g);
    check(last < users.size(), "a live block lies beyond the page map");
    for (std::uint32_t i = first; i <= last; ++i) users[i]++;
  }
  std::size_t mapped = 0, idle = 0;
  std::vector<std::uint64_t> physical;
  for (std::uint32_t i = 0; i < a.pages.get_count(); ++i) {
    const page_map::page& p = a.pages.get(i);
    check(p.users == users[i], "a page's user count differs from the live blocks on it");
    // A block in flight may wait on a page whose mapping by another thread just
    // failed; it finds the page unmapped when it wakes and places itself again.
    check(p.users == 0 || p.physical || p.busy || in_flight_blocks > 0,
          "a live byte is not mapped");
    check(p.idle == (p.physical && p.users == 0), "a page's idle mark is wrong");
    check(a.pages.is_usable(i) == (p.physical && !p.busy),
          "the bitmap of usable pages disagrees with the pages");
    if (p.physical) {
      ++mapped;
      physical.push_back(p.physical);
    }
    idle += p.idle;
  }
  std::sort(physical.begin(), physical.end());
  check(std::adjacent_find(physical.begin(), physical.end()) == physical.end(),
        "one physical page is mapped twice: two blocks would share a byte");
  check(mapped == a.mapped_pages, "the mapped-page count is wrong");
  check(idle == a.pages.get_idle_count(), "the idle list's length is wrong");
}

void allocator::state::add_arena_views(std::vector<segment_view>& views) const {
  if (!arena) return;
  const vm_arena& a = *arena;
  const std::size_t g = a.page_size;
  // One view per run of mapped pages, with the blocks that lie on it.
  const block* b = a.range.get_segments().front()->first;
  for (std::uint32_t i = 0; i < a.pages.get_count();) {
    if (!a.pages.get(i).physical) {
      ++i;
      continue;
    }
    std::uint32_t end = i;
    while (end < a.pages.get_count() && a.pages.get(end).physical) ++end;
    segment_view v{a.base + i * g, (end - i) * g, false, {}};
    const std::size_t lo = i * g, hi = end * g;
    while (b && b->offset + b->size <= lo) b = static_cast<const block*>(b->next_range);
    for (const block* x = b; x && x->offset < hi; x = static_cast<const block*>(x->next_range)) {
      const std::size_t from = std::max<std::size_t>(x->offset, lo);
      const std::size_t to = std::min<std::size_t>(x->offset + x->size, hi);
      v.blocks.push_back({from - lo, to - from, x->live ? x->requested : 0, x->live});
    }
    views.push_back(std::move(v));
    i = end;
  }
}

}  // namespace memkit

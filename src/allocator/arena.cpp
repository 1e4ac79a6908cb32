// The virtual-memory arena: large blocks in one reserved address range, physical
// pages mapped only under live blocks. See allocator/arena.hpp.
#include "allocator/arena.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <string>
#include <unordered_map>

#include "common/helpers.hpp"
#include "memkit/errors.hpp"

namespace memkit {

namespace {
using placement::page_map;
using pools::block;

// Free ranges examined for one whose pages are all mapped, before best fit. With
// no slack only ranges near the request's size: a much larger one would be split
// and leave partly used pages behind. With slack, memory is traded for map calls:
// any mapped range, among more of them.
constexpr int kMappedCandidates = 16;
constexpr int kMappedCandidatesWithSlack = 256;
constexpr std::size_t kNearFit = 8;  // "near": within 1/8 of the request
// Blocks of at least this many pages are placed by the mapped runs they fit (a
// partial page is at most an eighth of them); smaller ones by free ranges, whose
// bytes they pack so that neighbours share their partial pages.
constexpr std::size_t kRunFitPages = 8;
// Work, at most, looking for mapped pages inside free ranges (bitmap words read).
constexpr std::size_t kWindowPageScan = 4096;
// take_tightest_run: free ranges looked at once one holds a mapped run that fits. They
// come smallest first, and each costs a walk of its pages' bits: the random window
// looked at 18 a call, 5% faster with this cap, replay of the suite no worse.
constexpr int kRangesAfterFit = 4;
// Frees that record a fence after pages moved or a request waited for them: while
// pages move, a wait for some of them need not wait for all the work queued since.
constexpr std::uint32_t kFencesAfterMoves = 4096;
constexpr std::size_t kMinPageBytes = 4096;
// Shadows followed to find where a physical page is now (each move leaves one).
constexpr int kHomeHops = 8;
// Most pages a group holds (32 MiB of 2 MiB pages). A group's calls cost about two
// pages' (H100), but no page of it moves alone: with the cache emptied every step, groups of
// 8 / 16 / 32 pages made the suite's device calls 3.7 / 4.6 / 5.2 x cheaper and left
// 7 / 10 / 14 of 38 traces above 1.02 x live, against 7 (docs/BENCHMARKS.md).
constexpr std::uint32_t kRegrowGroupPages = 16;
// Inside the current plan's region, pages made again come by chunks of this many
// (region-aligned): the plan uses every page below its height in each repetition, so
// a chunk made whole holds no more than the repetition maps anyway.
constexpr std::uint32_t kRegrowChunkPages = 64;

}  // namespace

// With slack, when no free range has mapped pages where a block would be cut from
// it: the place inside a free range whose pages are most mapped, among the first
// few ranges (a place with all pages mapped ends the search). Freed ranges merge,
// so mapped pages often sit inside a larger free range; each page found mapped
// there is one map call (or move) saved. Within a range the best place starts at
// the range's start, where a run of mapped pages starts, or ends at the range's
// end: sliding any other place towards one of those never unmaps a page under it.
block* arena::take_most_mapped(std::size_t size, queue_id queue, queue_id* previous_queue) {
  const std::size_t g = page_size_;
  if (pages_.get_count() == 0) return nullptr;
  const block* best = nullptr;
  std::uint64_t best_start = 0;
  std::uint64_t best_need = std::numeric_limits<std::uint64_t>::max();  // unmapped pages
  std::uint64_t best_pages = 0;                                         // pages under it
  std::size_t scan_left = kWindowPageScan;  // bitmap words and run starts examined
  int ranges = 0;
  range_.visit_usable(size, queue, [&](const block* range) {
    if (++ranges > kMappedCandidatesWithSlack) return true;
    auto consider = [&](std::uint64_t start) {
      const std::uint64_t first = page_of(start);
      const std::uint64_t last = page_of(start + size - 1);
      const std::uint64_t need = last - first + 1 - pages_.count_usable(first, last);
      scan_left -= std::min<std::size_t>(scan_left, (last - first) / 64 + 1);
      if (need < best_need) {
        best = range;
        best_start = start;
        best_need = need;
        best_pages = last - first + 1;
      }
    };
    const std::uint64_t latest = range->offset + range->size - size;  // the highest start
    consider(range->offset);
    const std::uint64_t last_start_page =
        std::min<std::uint64_t>(page_of(latest), pages_.get_count());
    for (std::uint64_t page = page_of(range->offset) + 1;
         page <= last_start_page && best_need > 0 && scan_left > 0; ++page) {
      const std::uint64_t found = pages_.find_run_start(page, last_start_page);
      const std::uint64_t scanned = (found == page_map::kNoPage ? last_start_page : found) - page;
      scan_left -= std::min<std::size_t>(scan_left, scanned / 64 + 1);
      if (found == page_map::kNoPage) break;
      page = found;
      consider(page * g);
    }
    if (best_need > 0 && latest > range->offset) consider(latest);
    return scan_left == 0 || best_need == 0;
  });
  if (!best || best_need == best_pages) return nullptr;  // nothing mapped: plain best fit
  return range_.take_at(best, best_start, size, queue, previous_queue);
}

// Calls f(start, end) for each run of usable pages inside [range_start, range_end)
// (bytes from the range's base), clipped to it, lowest first, while scan_left (bitmap
// words to read) lasts.
template <class F>
void arena::visit_usable_runs(std::uint64_t range_start, std::uint64_t range_end,
                              std::size_t& scan_left, F&& f) const {
  const std::uint64_t g = page_size_;
  const std::uint64_t last =
      std::min<std::uint64_t>(page_of(range_end - 1), pages_.get_count() - 1);
  std::uint64_t page = page_of(range_start);
  while (page <= last && scan_left > 0) {
    if (!pages_.is_usable(page)) {
      const std::uint64_t found = pages_.find_run_start(page, last);
      scan_left -= std::min<std::size_t>(
          scan_left, (found == page_map::kNoPage ? last : found) / 64 - page / 64 + 1);
      if (found == page_map::kNoPage) break;
      page = found;
    }
    const std::uint64_t end_page = pages_.find_unusable(page, last);  // one past the run
    scan_left -= std::min<std::size_t>(scan_left, end_page / 64 - page / 64 + 1);
    const std::uint64_t start = std::max<std::uint64_t>(range_start, page * g);
    const std::uint64_t end = std::min<std::uint64_t>(range_end, end_page * g);
    if (end > start) f(start, end);
    page = end_page + 1;
  }
}

// With slack, the first choice for a block of many pages: best fit over runs of mapped
// pages rather than over free ranges. The block goes to the start of the shortest run
// of usable pages inside the first few free ranges that hold it (bounded work under
// the lock), so that it leaves the longer mapped runs whole for larger blocks to come
// (a free range's size says nothing of how much of it is mapped: a small block cut
// from the tightest free range may split the one run a larger block of the next step
// needed). Null when no run holds it.
block* arena::take_tightest_run(std::size_t size, queue_id queue, queue_id* previous_queue) {
  if (pages_.get_count() == 0) return nullptr;
  const block* best = nullptr;
  std::uint64_t best_start = 0;
  std::uint64_t best_room = std::numeric_limits<std::uint64_t>::max();
  std::size_t scan_left = kWindowPageScan;
  int ranges = 0;
  int after_found = 0;
  range_.visit_usable(size, queue, [&](const block* range) {
    if (++ranges > kMappedCandidatesWithSlack) return true;
    visit_usable_runs(range->offset, range->offset + range->size, scan_left,
                      [&](std::uint64_t start, std::uint64_t end) {
                        if (end - start >= size && end - start < best_room) {
                          best = range;
                          best_start = start;
                          best_room = end - start;
                        }
                      });
    if (best && ++after_found > kRangesAfterFit) return true;
    // A run that leaves less than a page over cannot be beaten by much.
    return scan_left == 0 || best_room < size + page_size_;
  });
  if (!best) return nullptr;
  return range_.take_at(best, best_start, size, queue, previous_queue);
}

// A plan's region lends its free mapped runs to online blocks of its queue while its
// plan places nothing there: the current plan's while its loop is lost (another loop
// runs between its repetitions: an eval phase between training steps, say), any
// other region always. Placed outside, those blocks would take the region's idle
// pages (kept for the plan's blocks, or held by a region that cannot go back to the
// range while a block lives in it), and the plan would take them back when its loop
// returns: the phase's pages would move twice each time. The block goes to the top of
// the highest run that holds it, away from where plans start; one still live where a
// planned block goes makes that request go online (loop_plan::unplan ignores it).
block* arena::take_lent(std::size_t size, queue_id queue, queue_id* previous_queue) {
  const bool current_lends = loop_.get_phase() == placement::loop_plan::phase::lost;
  for (auto it = regions_.rbegin(); it != regions_.rend(); ++it) {
    plan_region& region = **it;
    if (region.queue != queue || (is_current(region) && !current_lends)) continue;
    pools::segment_pool& pool = region.pool;
    const std::uint64_t origin = pool.get_segments().front()->base - base_;
    const block* best = nullptr;
    std::uint64_t best_start = 0;  // from the range's base
    std::size_t scan_left = kWindowPageScan;
    pool.visit_usable_by_address(size, queue, [&](const block* range) {
      visit_usable_runs(origin + range->offset, origin + range->offset + range->size, scan_left,
                        [&](std::uint64_t start, std::uint64_t end) {
                          if (end - start < size) return;
                          best = range;
                          best_start = end - size;
                        });
      return scan_left == 0;
    });
    if (best) return pool.take_at(best, best_start - origin, size, queue, previous_queue);
  }
  return nullptr;
}

std::unique_ptr<arena> arena::create(backend& device, const device_facts& facts,
                                     const fence_tracker& fences, double slack) {
  // At least 4 KiB a page: a finer granularity (the simulator takes any) would
  // only multiply the page map's entries and the map calls.
  const std::size_t g =
      common::round_up(kMinPageBytes, std::max<std::size_t>(facts.granularity, 1));
  // Pages are found by shifts on the hot path.
  if (!std::has_single_bit(g)) return nullptr;  // large blocks use segments
  // Eight times the device's memory in addresses: fragmentation in addresses is
  // free as long as a large block still finds a contiguous range.
  // Pages are numbered in 32 bits (placement::page_map), bytes in 64.
  constexpr std::size_t kMaxPages = placement::page_map::kNone - 1;
  std::size_t pages = facts.capacity / g + (facts.capacity % g != 0);
  pages = std::min({pages, kMaxPages / 8, std::numeric_limits<std::size_t>::max() / 8 / g}) * 8;
  std::size_t bytes = pages * g;
  address_t base = 0;
  while (bytes >= g && (base = device.reserve_range(bytes)) == 0)
    bytes = common::round_up(bytes / 2, g);
  if (base == 0) return nullptr;  // no addresses: large blocks use segments
  return std::make_unique<arena>(device, fences, slack, base, bytes, g);
}

arena::arena(backend& device, const fence_tracker& fences, double slack, address_t base,
             std::size_t size, std::size_t page_size)
    : device_(device),
      fences_(fences),
      slack_(slack),
      base_(base),
      size_(size),
      page_size_(page_size),
      page_shift_(static_cast<std::uint32_t>(std::countr_zero(page_size))),
      range_(false, fences.get_reuse_view()) {
  if (!std::has_single_bit(page_size)) {
    throw invalid_argument("[memkit::arena] a page of " + std::to_string(page_size) +
                           " bytes: pages must be a power of two");
  }
  range_.add_free_segment(base, size);
  range_.set_page_size(page_size);
  // Pages follow the layout: one that repeats step after step, whenever fences
  // complete, needs no page moved. Only while one queue uses the arena: another
  // queue must not find free memory joined to ranges still pending on the first.
  range_.set_merge_by_queue(true);
  fences_wanted_ = kFencesAfterMoves;  // the first steps, before any page moved
}

arena::~arena() {
  const std::size_t g = page_size_;
  // Every mapping first (a physical page may be mapped as shadows too), then the pages.
  for (std::uint32_t i = 0; i < pages_.get_count(); ++i) {
    const page_map::page& p = pages_.get(i);
    const std::size_t n = get_mapping_pages(i);
    if (n && (p.physical || p.shadow)) device_.unmap(base_ + i * g, n * g);
  }
  for (std::uint32_t i = 0; i < pages_.get_count(); ++i) {
    const page_map::page& p = pages_.get(i);
    const std::size_t n = get_mapping_pages(i);
    if (n && p.physical) device_.release_page(p.physical, n * g);
  }
  device_.release_range(base_, size_);
}

pools::segment_pool& arena::pool_of(const block* b) { return *b->owner->pool; }

const arena::plan_region* arena::find_region(const block* placeholder) const {
  for (const auto& region : regions_) {
    if (region->placeholder == placeholder) return region.get();
  }
  return nullptr;
}

void arena::merge_unmerged() {
  range_.merge_unmerged();
  for (auto& region : regions_) region->pool.merge_unmerged();
}

void arena::make_region(queue_id queue) {
  loop_.finish_plan();
  const std::size_t bytes = common::round_up(loop_.get_region_bytes(), page_size_);
  // The last region, empty and large enough, serves the next plan: its pages are
  // mapped where that plan's blocks go (plans of one loop's shapes overlap most).
  // Blocks it lent to online requests do not keep it: a planned block whose place one
  // holds goes online while it does (the first requests of a step whose plan came back
  // after them hold theirs for that step), where a new region would move every page.
  if (!regions_.empty() && is_empty(*regions_.back(), true) &&
      regions_.back()->pool.get_segments().front()->size >= bytes) {
    regions_.back()->queue = queue;
    loop_.set_region_ready();
    return;
  }
  // As high as the highest plan kept, so that each can use it in turn: addresses
  // cost nothing, and pages are mapped only under live blocks.
  const std::size_t span =
      std::max(bytes, common::round_up(loop_.calculate_highest_plan(), page_size_));
  // Page-aligned, so that the plan's blocks share pages only with each other.
  // It is made at the loop's cut, where the blocks of the repetition before have
  // gone: where their pages are most mapped, few need to move.
  queue_id previous = 0;
  block* place = take_most_mapped(span + page_size_, queue, &previous);
  if (!place) place = range_.take(span + page_size_, queue);
  if (!place) return;  // no addresses: the loop stays online
  loop_.set_region_ready();
  auto region = std::make_unique<plan_region>(fences_.get_reuse_view());
  region->placeholder = place;
  region->queue = queue;
  const std::size_t start = common::round_up(place->offset, page_size_);
  region->pool.set_index_by_address(true);
  region->pool.add_free_segment(base_ + start, span);
  region->pool.set_page_size(page_size_);
  // Only the plan's queue takes blocks from a region (loop_plan::get_plan_queue):
  // its free blocks merge whatever their fence state, as in a one-queue range.
  region->pool.set_merge_by_queue(true);
  region->pool.set_keep_top_apart(false);
  regions_.push_back(std::move(region));
}

bool arena::is_empty(const plan_region& region, bool but_lent) const {
  const pools::segment* s = region.pool.get_segments().front();
  if (s->live_blocks > 0 && !but_lent) return false;
  for (const block* b = s->first; b; b = static_cast<const block*>(b->next_range)) {
    if (b->deferred || (b->live && !b->lent)) return false;
  }
  return true;
}

void arena::retire_empty_regions() {
  if (!only_one_queue_) return;
  for (std::size_t k = 0; k < regions_.size();) {
    plan_region& region = *regions_[k];
    if (is_current(region) || !is_empty(region)) {
      ++k;
      continue;
    }
    range_.give_back(region.placeholder, last_free_serial_);
    regions_.erase(regions_.begin() + static_cast<std::ptrdiff_t>(k));
  }
}

block* arena::take_planned(std::uint64_t offset, std::size_t size, queue_id queue,
                           queue_id* previous_queue) {
  if (regions_.empty()) return nullptr;
  pools::segment_pool& pool = regions_.back()->pool;
  const block* free_range = pool.find_free_at(offset, size);
  if (!free_range) {
    // Planned blocks still live there outlived their plan: online from now on, or
    // this place would be missed every repetition (and pages move each time).
    for (const block* b = pool.get_segments().front()->first; b && b->offset < offset + size;
         b = static_cast<const block*>(b->next_range)) {
      if (b->live && b->offset + b->size > offset) loop_.unplan(b->loop_serial);
    }
    return nullptr;
  }
  if (!pool.is_usable(free_range, queue)) return nullptr;
  return pool.take_at(free_range, offset, size, queue, previous_queue);
}

bool arena::take(std::size_t size, queue_id queue, const budget& room, loop_note& note,
                 request& r) {
  if (!placed_any_) {
    placed_any_ = true;
    sole_queue_ = queue;
  } else if (only_one_queue_ && queue != sole_queue_) {
    only_one_queue_ = false;
    range_.set_merge_by_queue(false);
  }
  if (!note.noted && plan_loops_) {
    note.noted = true;
    note.serial = loop_.on_request(size, queue);
    // A plan is worth its region only where online placement keeps moving pages:
    // elsewhere the switch would move them once for nothing. It is made at the
    // loop's cut, or at once for a plan brought back (it needed its region before).
    const bool wants_region = loop_.get_region_bytes() > 0 && !loop_.is_region_ready();
    if (wants_region && loop_.is_revived()) make_region(loop_.get_plan_queue());
    if (loop_.is_at_start()) {
      if (wants_region && !loop_.is_revived() && moves_ > moves_at_start_)
        make_region(loop_.get_plan_queue());
      moves_at_start_ = moves_;
    }
    if (!regions_.empty() && !is_current(*regions_.front())) retire_empty_regions();
    note.offset = loop_.get_offset();  // from this request on once the region is made
  }
  block* b = nullptr;
  if (note.offset != placement::loop_plan::kNone) {
    b = take_planned(note.offset, size, queue, &r.previous_queue);
    if (b)
      loop_.on_placed();
    else
      loop_.on_missed();
  }
  if (!b) b = take_online(size, queue, r);
  if (!b) {
    r.shortfall = std::numeric_limits<std::size_t>::max();  // no addresses left
    return false;
  }
  b->loop_serial = note.serial;
  b->lent = r.lent;
  return plan_pages(b, queue, room, r);
}

block* arena::take_online(std::size_t size, queue_id queue, request& r) {
  // First choice: a place whose pages are all mapped already; it costs no map call.
  // A block of many pages takes the shortest mapped run that holds it; a smaller one,
  // the best-fitting free range whose pages are mapped where it would be cut, among
  // the first few that fit (its partial pages are shared with its neighbours). With
  // slack, then a mapped run a plan's region lends (take_lent), then the most-mapped
  // place inside a free range. Otherwise best fit.
  const bool near_only = slack_ <= 0.0;
  block* b = nullptr;
  r.lent = false;
  if (!near_only && size >= kRunFitPages * page_size_) {
    b = take_tightest_run(size, queue, &r.previous_queue);
  } else {
    const int max_candidates = near_only ? kMappedCandidates : kMappedCandidatesWithSlack;
    int candidates = 0;
    b = range_.take_where(
        size, queue,
        [&](const block* free_range, std::size_t start) {
          if (++candidates > max_candidates ||
              (near_only && free_range->size > size + size / kNearFit))
            return false;
          const std::uint32_t first_page = page_of(start);
          const std::uint32_t last_page = page_of(start + size - 1);
          return pages_.are_all_usable(first_page, last_page);
        },
        &r.previous_queue);
  }
  if (!b && !near_only) {
    b = take_lent(size, queue, &r.previous_queue);
    r.lent = b != nullptr;
  }
  if (!b && !near_only) b = take_most_mapped(size, queue, &r.previous_queue);
  if (!b) b = range_.take(size, queue, &r.previous_queue);
  return b;
}

template <class Visit>
void arena::visit_idle_by_age(Visit&& visit) {
  // The current plan's region keeps its idle pages for the plan's next blocks: taken
  // elsewhere, they would be taken back in its next repetition, and pages would move
  // every step. So they come after every other idle page.
  const auto [kept_first, kept_last] = get_kept_pages();
  const std::vector<std::uint32_t> by_age = pages_.calculate_idle_by_age();
  for (int pass = 0; pass < 2; ++pass) {
    for (const std::uint32_t j : by_age) {
      const bool kept = j >= kept_first && j <= kept_last;
      if (kept == (pass == 1) && !visit(j)) return;
    }
    if (kept_first > kept_last) return;  // no region: the first pass saw every page
  }
}

// Highest pages first: moving the idle pages at the top keeps the mapped runs below
// them whole for the blocks to come, where least recently used ones were taken from
// anywhere (long runs of the suite's loops moved 28% fewer pages and unmapped 36% fewer:
// docs/BENCHMARKS.md). The current plan's region's pages come last (see visit_idle_by_age).
void arena::find_victims(std::uint32_t first, std::uint32_t last, queue_id queue,
                         std::size_t wanted, std::vector<std::uint32_t>& stolen,
                         std::vector<std::uint64_t>& waiting) const {
  if (pages_.get_count() == 0) return;
  // Idle pages in [from, to], downwards; false once enough were found.
  auto scan = [&](std::uint32_t from, std::uint32_t to) {
    for (std::uint32_t j = pages_.find_idle_below(to, from); j != page_map::kNone;) {
      if (j >= first && j <= last) {  // the block's own pages
        j = first > from ? pages_.find_idle_below(first - 1, from) : page_map::kNone;
        continue;
      }
      // Its place becomes a shadow, which a later block there unmaps, and unmapping
      // is not ordered on any queue: the work that used the page must be complete,
      // even on this very queue.
      // A group's pages never move alone (dissolve_groups gives the group back instead).
      if (get_group(j) == page_map::kNone) {
        if (has_completed(j))
          stolen.push_back(j);
        else if (pages_.get_queue(j) == queue)
          waiting.push_back(pages_.get_free_serial(j));
      }
      if (stolen.size() >= wanted) return false;
      j = j > from ? pages_.find_idle_below(j - 1, from) : page_map::kNone;
    }
    return true;
  };
  const std::uint32_t top = pages_.get_count() - 1;
  const auto [kept_first, region_last] = get_kept_pages();
  if (kept_first > region_last) {
    scan(0, top);
    return;
  }
  const std::uint32_t kept_last = std::min(region_last, top);
  if (kept_last < top && !scan(kept_last + 1, top)) return;
  if (kept_first > 0 && !scan(0, kept_first - 1)) return;
  if (kept_first <= kept_last) scan(kept_first, kept_last);
}

std::size_t arena::reclaim_shadows(std::uint32_t first, std::uint32_t last, std::size_t shadowed,
                                   std::size_t most, request& r) {
  std::size_t taken = 0;
  for (std::uint32_t i = first; i <= last && shadowed > 0 && taken < most; ++i) {
    const page_map::page& p = pages_.get(i);
    if (p.physical || p.busy || !p.shadow) continue;
    --shadowed;
    const std::uint32_t home = find_reclaimable_home(i, first, last);
    if (home == page_map::kNone) continue;
    reclaim(i, home);
    r.reclaimed.push_back({i, home});
    ++taken;
  }
  return taken;
}

void arena::record_pages(std::uint32_t first, std::uint32_t last,
                         const std::vector<std::uint32_t>& stolen, request& r) {
  std::size_t k = 0;
  for (std::uint32_t i = first; i <= last; ++i) {
    page_map::page& p = pages_.at(i);
    const bool needs_page = !p.physical && !p.busy;
    // Only a request that maps or waits can be cancelled.
    if (pages_.get_users(i) == 0 && p.physical)
      r.was_idle.push_back({i, pages_.get_queue(i), pages_.get_free_serial(i)});
    pages_.add_user(i);
    if (!needs_page) continue;
    pages_.set_busy(i, true);
    page_plan plan{i, 0, page_map::kNone};
    plan.unmap_shadow = p.shadow != 0;
    if (k < stolen.size()) {
      // The victim stays mapped to it, as its shadow: no unmap now, and the page
      // may come back there at no cost.
      const std::uint32_t j = stolen[k++];
      page_map::page& victim = pages_.at(j);
      plan.physical = victim.physical;
      plan.stolen_from = j;
      pages_.set_idle(j, false);
      pages_.set_physical(j, 0);
      pages_.set_shadow(j, plan.physical, i);
      pages_.set_busy(j, true);  // until the map: no other block maps over it meanwhile
      mapped_pages_--;
      held_unmapped_++;
    }
    r.pages.push_back(plan);
  }
}

bool arena::plan_pages(block* b, queue_id queue, const budget& room, request& r) {
  const std::size_t g = page_size_;
  const std::uint32_t first = first_page(b);
  const std::uint32_t last = last_page(b);
  std::size_t need = 0;
  std::size_t shadowed = 0;  // of those, pages with a shadow
  // Usually every page is mapped and none busy: one look at the bitmap says so.
  if (!pages_.are_all_usable(first, last)) {
    for (std::uint32_t i = first; i <= last; ++i) {
      const page_map::page& p = pages_.at(i);
      if (p.busy) {
        r.must_wait = true;
      } else if (!p.physical) {
        ++need;
        shadowed += p.shadow != 0;
      }
    }
  }
  // Idle pages elsewhere, highest first (find_victims), that this queue may take,
  // for the pages that new ones cannot give within the slack over the peak in
  // use: every stolen page is a map now (its old place keeps it as a shadow) and
  // likely a map again later.
  std::vector<std::uint32_t> stolen;
  const std::size_t in_use = room.in_use;
  // Pages that may still be made; only a block that needs pages asks (the usual one
  // lands on mapped pages, and a product and a division are saved).
  std::size_t room_pages = 0;
  if (need > 0) {
    const std::size_t growth_room = get_growth_room(room.peak_active);
    room_pages = growth_room > in_use ? (growth_room - in_use) >> page_shift_ : 0;
  }
  // Past the slack, a page whose shadow is idle where it went takes it back first:
  // a move that costs no call.
  if (shadowed > 0 && need > room_pages)
    need -= reclaim_shadows(first, last, shadowed, need - room_pages, r);
  const std::size_t to_steal = need > room_pages ? need - room_pages : 0;
  // Idle pages that could move once this queue's work completes; the
  // serial of the free that makes enough of them movable.
  std::vector<std::uint64_t> waiting;
  if (to_steal > 0) find_victims(first, last, queue, to_steal, stolen, waiting);
  std::size_t dissolved = 0;
  if (stolen.size() < to_steal && !group_pages_.empty())
    dissolved = dissolve_groups(first, last, queue, to_steal - stolen.size(), r, waiting);
  const std::size_t creates = need - stolen.size();
  r.past_slack = stolen.size() + (creates > room_pages ? creates - room_pages : 0);
  r.wait_would_help = creates > room_pages && !waiting.empty();
  moves_ += stolen.size() + (r.wait_would_help ? 1 : 0);
  if (!stolen.empty() || r.wait_would_help) fences_wanted_ = kFencesAfterMoves;
  if (r.wait_would_help) r.wait_serial = pools::serial_freeing(waiting, creates - room_pages);
  if (in_use + creates * g > room.limit + dissolved * g) {
    r.shortfall = in_use + creates * g - room.limit - dissolved * g;
    restore_groups(r);
    undo_reclaims(r);
    b->queue = r.previous_queue;
    pool_of(b).give_back(b, b->free_serial);
    return false;
  }
  r.b = b;
  r.creates = creates;
  // Pages given back are made again in groups (one physical allocation, one mapping,
  // a call for many pages) until the arena holds as many as before.
  if (mapped_pages_ + held_unmapped_ < regrow_until_)
    r.max_group = kRegrowGroupPages;
  else
    regrow_until_ = 0;
  r.reserving = creates * g;
  if (need == 0 && !r.must_wait) {  // every page mapped: only the users change
    pages_.add_users(first, last);
    return true;
  }
  record_pages(first, last, stolen, r);
  if (r.max_group > 1 && stolen.empty() && !r.must_wait && creates > 0 && creates < room_pages) {
    const std::size_t below_limit = room.limit > in_use ? (room.limit - in_use) / g : 0;
    if (below_limit > creates)
      add_chunk_pages(first, last, std::min(room_pages, below_limit) - creates, r);
  }
  return true;
}

void arena::add_chunk_pages(std::uint32_t first, std::uint32_t last, std::size_t most, request& r) {
  if (most == 0 || regions_.empty() || !is_current(*regions_.back()) || loop_.is_revived() ||
      &pool_of(r.b) != &regions_.back()->pool)
    return;
  const std::size_t g = page_size_;
  const auto region_first =
      static_cast<std::uint32_t>(common::round_up(regions_.back()->placeholder->offset, g) / g);
  const auto height = static_cast<std::uint32_t>(common::round_up(loop_.get_region_bytes(), g) / g);
  if (first < region_first || last >= region_first + height) return;
  const std::uint32_t lo =
      region_first + (first - region_first) / kRegrowChunkPages * kRegrowChunkPages;
  const std::uint32_t hi =
      std::min(region_first + ((last - region_first) / kRegrowChunkPages + 1) * kRegrowChunkPages,
               region_first + height) -
      1;
  std::vector<page_plan> below;
  std::vector<page_plan> above;
  auto add = [&](std::uint32_t i, std::vector<page_plan>& to) {
    const page_map::page& p = pages_.at(i);
    if (p.physical || p.busy || p.shadow || pages_.get_users(i) > 0 || most == 0) return false;
    pages_.set_busy(i, true);
    page_plan plan{i, 0, page_map::kNone};
    plan.beside = true;
    to.push_back(plan);
    --most;
    return true;
  };
  // Outwards from the block, so that the pages added join its own run.
  for (std::uint32_t i = first; i-- > lo && add(i, below);) {
  }
  for (std::uint32_t i = last + 1; i <= hi && add(i, above); ++i) {
  }
  const std::size_t added = below.size() + above.size();
  if (added == 0) return;
  std::reverse(below.begin(), below.end());
  below.insert(below.end(), r.pages.begin(), r.pages.end());
  below.insert(below.end(), above.begin(), above.end());
  r.pages = std::move(below);
  r.max_group = kRegrowChunkPages;
  r.creates += added;
  r.reserving = r.creates * g;
}

bool arena::map(request& r) {
  const std::size_t g = page_size_;
  const address_t base = base_;
  std::size_t mapped = 0;  // entries of the plan mapped so far
  r.shadows_unmapped = 0;
  try {
    // Dissolved groups first: their memory makes room for the pages created below.
    for (const page_plan& p : r.dissolved) {
      device_.unmap(base + p.index * g, p.pages * g);
      ++r.groups_unmapped;
      device_.release_page(p.physical, p.pages * g);
    }
    for (const page_plan& p : r.pages) {
      if (p.unmap_shadow) device_.unmap(base + p.index * g, g);
      ++r.shadows_unmapped;
    }
    for (std::size_t k = 0; k < r.pages.size();) {
      page_plan& p = r.pages[k];
      if (p.physical) {
        ++k;
        continue;
      }
      // The run of pages to create from here, up to the request's group size.
      std::size_t run = 1;
      while (run < r.max_group && k + run < r.pages.size() && !r.pages[k + run].physical &&
             r.pages[k + run].index == p.index + run)
        ++run;
      p.physical = device_.create_page(run * g);
      if (!p.physical) return false;
      p.pages = static_cast<std::uint32_t>(run);
      for (std::size_t m = 1; m < run; ++m) {
        r.pages[k + m].physical = p.physical;
        r.pages[k + m].pages = 0;
      }
      k += run;
    }
    std::size_t run_start = 0;
    for (std::size_t k = 0; k < r.pages.size(); ++k) {
      if (r.pages[k].pages) {
        device_.map(base + r.pages[k].index * g, r.pages[k].physical, r.pages[k].pages * g);
        mapped = k + 1;
      }
      const bool run_ends = k + 1 == r.pages.size() || r.pages[k + 1].index != r.pages[k].index + 1;
      if (run_ends) {
        device_.set_access(base + r.pages[run_start].index * g,
                           (r.pages[k].index - r.pages[run_start].index + 1) * g);
        run_start = k + 1;
      }
    }
    return true;
  } catch (const std::exception&) {
    // A backend call failed outright: undo the mappings made, so that the pages
    // in hand can be released and the request fails cleanly.
    auto try_unmap = [&](address_t at, std::size_t bytes) {
      try {
        device_.unmap(at, bytes);
      } catch (const std::exception&) {
      }
    };
    for (std::size_t k = 0; k < mapped; ++k) {
      if (r.pages[k].pages) try_unmap(base + r.pages[k].index * g, r.pages[k].pages * g);
    }
    return false;
  }
}

arena::page_counts arena::finish(request& r, bool mapped, std::vector<page_plan>& to_release) {
  page_counts counts;
  counts.returned = commit_returns(r);
  // Dissolved groups: gone, but those map() did not reach (a call failed) stay.
  for (std::size_t k = 0; k < r.groups_unmapped; ++k) {
    const page_plan& p = r.dissolved[k];
    for (std::uint32_t m = p.index; m < p.index + p.pages; ++m) pages_.set_busy(m, false);
    counts.released += p.pages;
    counts.unmapped += p.pages;
    counts.frees++;
    held_unmapped_ -= p.pages;
  }
  r.dissolved.erase(r.dissolved.begin(), r.dissolved.begin() + r.groups_unmapped);
  r.groups_unmapped = 0;
  restore_groups(r);
  // The shadows unmapped under the block's pages (all of them, when mapped).
  for (std::size_t k = 0; k < r.shadows_unmapped; ++k) {
    if (!r.pages[k].unmap_shadow) continue;
    pages_.set_shadow(r.pages[k].index, 0, page_map::kNone);
    counts.unmapped++;
  }
  if (mapped) {
    for (const page_plan& p : r.pages) {
      if (p.stolen_from != page_map::kNone) {
        pages_.set_busy(p.stolen_from, false);  // its shadow stays
        held_unmapped_--;
        counts.moved++;
        tell(p.stolen_from, false);
      } else {
        counts.created++;
        counts.allocations += p.pages != 0;
        if (p.pages > 1) add_group(p.index, p.pages);
      }
      tell(p.index, true);
      pages_.set_physical(p.index, p.physical);
      pages_.set_busy(p.index, false);
      if (p.beside) {  // used by no block yet: idle, with no work to wait for
        pages_.set_last_use(p.index, r.b->queue, 0);
        pages_.set_idle(p.index, true);
      }
    }
    mapped_pages_ += r.pages.size();
    counts.mapped = r.pages.size();
  } else {
    // A device that refused a group (or a chunk beside its block) gets pages one at a
    // time again, until the next emptying: the block's own pages may fit where a
    // larger physical allocation does not.
    if (r.max_group > 1) regrow_until_ = 0;
    // Stolen pages go back where they came from (still mapped there); those created
    // before the backend ran out go back to the device: the caller releases them
    // without the lock.
    restore_victims(r);
    for (const page_plan& p : r.pages) {
      pages_.set_busy(p.index, false);
      if (p.physical && p.stolen_from == page_map::kNone) {
        if (p.pages) {
          page_plan out{p.index, p.physical, page_map::kNone};
          out.pages = p.pages;
          to_release.push_back(out);
          counts.allocations++;
          counts.frees++;
        }
        counts.created++;
        counts.released++;
      }
    }
    cancel(r);
  }
  return counts;
}

std::size_t arena::commit_returns(request& r) {
  for (const auto& [i, home] : r.reclaimed) {
    tell(home, false);
    tell(i, true);
  }
  const std::size_t returned = r.reclaimed.size();
  r.reclaimed.clear();
  return returned;
}

std::uint32_t arena::find_reclaimable_home(std::uint32_t i, std::uint32_t first,
                                           std::uint32_t last) const {
  const std::uint32_t h = find_home(i);
  if (h == page_map::kNone || (h >= first && h <= last)) return page_map::kNone;
  // Complete, as for a steal: the home becomes a shadow, which may be unmapped.
  const bool reclaimable = pages_.is_idle(h) && !pages_.get(h).busy && has_completed(h);
  return reclaimable ? h : page_map::kNone;
}

std::uint32_t arena::find_home(std::uint32_t i) const {
  const page_id physical = pages_.get(i).shadow;
  std::uint32_t h = pages_.get(i).shadow_home;
  // Where it moved on from its first home, that home is a shadow too, pointing on.
  for (int hops = 0; hops < kHomeHops && h < pages_.get_count(); ++hops) {
    const page_map::page& at = pages_.get(h);
    if (at.physical == physical) return h;
    if (at.shadow != physical) break;
    h = at.shadow_home;
  }
  return page_map::kNone;
}

void arena::reclaim(std::uint32_t i, std::uint32_t h) {
  const page_id physical = pages_.get(i).shadow;
  pages_.set_idle(h, false);
  pages_.set_physical(h, 0);
  pages_.set_shadow(h, physical, i);
  pages_.set_shadow(i, 0, page_map::kNone);
  pages_.set_physical(i, physical);
  // The physical page's last use, for the fences that guard it.
  pages_.set_last_use(i, pages_.get_queue(h), pages_.get_free_serial(h));
}

void arena::undo_reclaims(request& r) {
  for (auto it = r.reclaimed.rbegin(); it != r.reclaimed.rend(); ++it) {
    const auto [i, h] = *it;
    const page_id physical = pages_.get(i).physical;
    pages_.set_physical(i, 0);
    pages_.set_shadow(i, physical, h);
    pages_.set_shadow(h, 0, page_map::kNone);
    pages_.set_physical(h, physical);
    pages_.set_idle(h, true);
  }
  r.reclaimed.clear();
}

void arena::restore_victims(request& r) {
  for (const page_plan& p : r.pages) {
    if (p.stolen_from == page_map::kNone) continue;
    pages_.set_shadow(p.stolen_from, 0, page_map::kNone);
    pages_.set_busy(p.stolen_from, false);
    pages_.set_physical(p.stolen_from, p.physical);
    // After a failed mapping, a block placed over it meanwhile (waiting while it was
    // busy) may use it: then it is not idle.
    if (pages_.get_users(p.stolen_from) == 0) pages_.set_idle(p.stolen_from, true);
    mapped_pages_++;
    held_unmapped_--;
  }
}

std::size_t arena::dissolve_groups(std::uint32_t first, std::uint32_t last, queue_id queue,
                                   std::size_t wanted, request& r,
                                   std::vector<std::uint64_t>& waiting) {
  std::size_t pages = 0;
  const auto [kept_first, kept_last] = get_kept_pages();
  // Highest first and the current plan's region's last, as for stolen pages.
  for (int pass = 0; pass < 2 && pages < wanted; ++pass) {
    for (auto it = group_pages_.rbegin(); it != group_pages_.rend(); ++it) {
      const auto [group, n] = *it;
      if (pages >= wanted) break;
      if (group <= last && group + n > first) continue;
      const bool kept = group <= kept_last && group + n > kept_first;
      if (kept != (pass == 1)) continue;
      if (!is_group_free(group)) {
        note_group_wait(group, n, queue, waiting);
        continue;
      }
      page_plan plan{group, pages_.get(group).physical, group};
      plan.pages = n;
      r.dissolved.push_back(plan);
      pages += n;
    }
  }
  for (const page_plan& p : r.dissolved) {
    take_out_group(p.index);
    held_unmapped_ += p.pages;  // until map() releases it
  }
  return pages;
}

void arena::restore_groups(request& r) {
  for (const page_plan& p : r.dissolved) {
    for (std::uint32_t m = p.index; m < p.index + p.pages; ++m) {
      tell(m, true);
      pages_.set_busy(m, false);
      pages_.set_physical(m, p.physical);
      pages_.set_idle(m, true);
    }
    add_group(p.index, p.pages);
    mapped_pages_ += p.pages;
    held_unmapped_ -= p.pages;
  }
  r.dissolved.clear();
}

void arena::cancel(request& r) {
  block* b = r.b;
  const std::uint32_t first = first_page(b);
  const std::uint32_t last = last_page(b);
  b->queue = r.previous_queue;
  const std::uint64_t serial = b->free_serial;
  pool_of(b).give_back(b, serial);
  pages_.remove_users(first, last, r.previous_queue, serial);
  for (const request::idle_page& was : r.was_idle) {
    if (pages_.get_users(was.index) > 0 || !pages_.get(was.index).physical) continue;
    pages_.set_last_use(was.index, was.queue, was.free_serial);
  }
  r.was_idle.clear();
  r.b = nullptr;
}

void arena::abandon(request& r) {
  for (const page_plan& p : r.pages) pages_.set_busy(p.index, false);
  restore_groups(r);
  restore_victims(r);
  undo_reclaims(r);
  cancel(r);
}

bool arena::free(block* b, std::uint64_t serial) {
  const std::uint32_t first = first_page(b);
  const std::uint32_t last = last_page(b);
  const queue_id queue = b->queue;
  loop_.on_free(b->loop_serial);
  last_free_serial_ = serial;
  pools::segment_pool& pool = pool_of(b);
  if (b->deferred)
    pool.release_deferred(b);
  else
    pool.give_back(b, serial);
  const bool idled = pages_.remove_users(first, last, queue, serial);
  if (!idled || fences_wanted_ == 0) return false;
  fences_wanted_--;
  return fences_.wants_record(queue, serial);
}

void arena::make_small_area() {
  // At the bottom of the range, made before any block: page-aligned, no page of it is
  // shared with a large block, and the page map does not grow for it.
  if (small_area_ || placed_any_) return;
  const std::size_t span = std::min(kSmallAreaPages, size_ / page_size_ / 16) * page_size_;
  const block* all = range_.get_segments().front()->first;
  if (span == 0 || all->live || all->size < span) return;
  queue_id previous = 0;
  small_place_ = range_.take_at(all, 0, span, 0, &previous);
  if (!small_place_) return;
  small_area_ = std::make_unique<pools::segment_pool>(false, fences_.get_reuse_view());
  small_area_->add_free_segment(base_, span);
  small_area_->set_merge_by_queue(true);
}

bool arena::take_small_segment(queue_id queue, const budget& room, request& r) {
  if (!small_area_) return false;
  block* b = small_area_->take(page_size_, queue, &r.previous_queue);
  if (!b) return false;                          // the area is full: a segment of its own
  b->loop_serial = placement::loop_plan::kNone;  // not the loop's: its free is not either
  r.small_segment = true;
  return plan_pages(b, queue, room, r);
}

bool arena::is_settled(const block* b) const {
  for (std::uint32_t i = first_page(b); i <= last_page(b); ++i) {
    if (pages_.get(i).busy) return false;
  }
  return true;
}

bool arena::is_mapped(const block* b) const {
  bool all_mapped = true;
  for (std::uint32_t i = first_page(b); i <= last_page(b); ++i) {
    all_mapped &= pages_.get(i).physical != 0;
  }
  return all_mapped;
}

std::uint32_t arena::take_out_group(std::uint32_t first) {
  const std::uint32_t n = group_pages_.at(first);
  for (std::uint32_t m = first; m < first + n; ++m) {
    tell(m, false);
    pages_.set_idle(m, false);
    pages_.set_physical(m, 0);
    pages_.set_busy(m, true);  // until unmapped (settle_released, finish)
  }
  std::fill_n(group_of_.begin() + first, n, page_map::kNone);
  group_pages_.erase(first);
  mapped_pages_ -= n;
  return n;
}

void arena::note_group_wait(std::uint32_t first, std::uint32_t n, queue_id queue,
                            std::vector<std::uint64_t>& waiting) const {
  std::uint64_t serial = 0;  // the group goes back once its last free's work is done
  for (std::uint32_t m = first; m < first + n; ++m) {
    if (!pages_.is_idle(m) || pages_.get(m).busy) return;
    if (has_completed(m)) continue;
    if (pages_.get_queue(m) != queue) return;  // never a wait on another queue's work
    serial = std::max(serial, pages_.get_free_serial(m));
  }
  if (serial > 0) waiting.insert(waiting.end(), n, serial);
}

bool arena::is_group_free(std::uint32_t first) const {
  const std::uint32_t n = group_pages_.at(first);
  for (std::uint32_t m = first; m < first + n; ++m) {
    if (!pages_.is_idle(m) || pages_.get(m).busy || !has_completed(m)) return false;
  }
  return true;
}

std::size_t arena::calculate_releasable() const {
  std::size_t pages = 0;
  pages_.visit_idle([&](std::uint32_t j) {
    const std::uint32_t group = get_group(j);
    if (group == page_map::kNone ? has_completed(j) : is_group_free(group)) ++pages;
  });
  return pages * page_size_;
}

std::uint64_t arena::calculate_wait_serial(queue_id queue, std::size_t pages) const {
  std::vector<std::uint64_t> waiting;
  pages_.visit_idle([&](std::uint32_t j) {
    if (pages_.get_queue(j) == queue && !has_completed(j))
      waiting.push_back(pages_.get_free_serial(j));
  });
  return pools::serial_freeing(waiting, pages);
}

arena::page_counts arena::release_idle(std::size_t bytes, std::vector<page_plan>& out) {
  page_counts counts;
  if (bytes == 0) return counts;
  // A physical page goes back only once unmapped everywhere: its shadows too. One
  // that another request is unmapping now (busy) stays, and so does its page.
  std::unordered_multimap<page_id, std::uint32_t> shadows;
  std::unordered_set<page_id> kept;
  if (pages_.get_shadow_count() > 0) {
    for (std::uint32_t i = 0; i < pages_.get_count(); ++i) {
      const page_map::page& p = pages_.get(i);
      if (!p.shadow) continue;
      shadows.emplace(p.shadow, i);
      if (p.busy) kept.insert(p.shadow);
    }
  }
  // Everything that may go back goes (clear_cache): no order to keep, and a group is
  // looked at once, at its first page (idle whenever the group may go).
  const bool all = bytes >= (mapped_pages_ + held_unmapped_) * page_size_;
  auto release = [&](std::uint32_t j) {
    const page_map::page& p = pages_.at(j);
    if (!p.physical) return true;  // gone with its group
    if (const std::uint32_t group = get_group(j); group != page_map::kNone) {
      if ((all && j != group) || !is_group_free(group)) return true;
      page_plan out_group{group, p.physical, group};
      out_group.pages = take_out_group(group);
      out.push_back(out_group);
      counts.released += out_group.pages;
      counts.unmapped += out_group.pages;
      counts.frees++;
      return counts.released * page_size_ < bytes;
    }
    if (has_completed(j) && !kept.contains(p.physical)) {
      const auto [from, to] = shadows.equal_range(p.physical);
      for (auto it = from; it != to; ++it) {
        out.push_back({it->second, 0, it->second});
        pages_.set_shadow(it->second, 0, page_map::kNone);
        pages_.set_busy(it->second, true);  // until unmapped
        counts.unmapped++;
      }
      out.push_back({j, p.physical, j});
      tell(j, false);
      pages_.set_idle(j, false);
      pages_.set_physical(j, 0);
      pages_.set_busy(j, true);  // until give_back has unmapped it (see settle_released)
      mapped_pages_--;
      counts.released++;
      counts.frees++;
      counts.unmapped++;
    }
    return counts.released * page_size_ < bytes;
  };
  if (all)
    pages_.visit_idle([&](std::uint32_t j) { release(j); });
  else
    visit_idle_by_age(release);
  return counts;
}

void arena::give_back(const std::vector<page_plan>& pages) {
  if (pages.empty()) return;
  const std::size_t g = page_size_;
  for (const page_plan& p : pages) {
    if (p.stolen_from != page_map::kNone) device_.unmap(base_ + p.stolen_from * g, p.pages * g);
    if (p.physical) device_.release_page(p.physical, p.pages * g);
  }
}

void arena::settle_released(const std::vector<page_plan>& pages) {
  for (const page_plan& p : pages) {
    if (p.stolen_from == page_map::kNone) continue;
    for (std::uint32_t m = 0; m < p.pages; ++m) pages_.set_busy(p.stolen_from + m, false);
  }
}

std::size_t arena::recount(std::size_t* live_bytes, std::size_t* live_blocks,
                           std::size_t* requested) const {
  std::size_t unmapped_addresses = 0;
  range_.validate(live_bytes, &unmapped_addresses, live_blocks, requested);
  for (const auto& region : regions_) {
    // The placeholder holds the region's addresses, not memory of its own.
    *live_bytes -= region->placeholder->size;
    *live_blocks -= 1;
    region->pool.validate(live_bytes, &unmapped_addresses, live_blocks, requested);
  }
  if (small_area_) {
    // So does the small area's; its blocks are the small pool's segments, whose own
    // blocks the small pool counts.
    *live_bytes -= small_place_->size;
    *live_blocks -= 1;
  }
  return (mapped_pages_ + held_unmapped_) * page_size_;
}

void arena::validate(bool blocks_in_flight) const {
  auto check = [](bool ok, const char* what) {
    if (!ok) throw invariant_violation(std::string("[memkit::validate] arena: ") + what);
  };
  std::vector<std::uint32_t> users(pages_.get_count(), 0);
  auto count_users = [&](const pools::segment_pool& pool) {
    for (const block* b = pool.get_segments().front()->first; b;
         b = static_cast<const block*>(b->next_range)) {
      if ((!b->live && !b->deferred) || find_region(b) || b == small_place_) continue;
      const std::uint32_t first = first_page(b);
      const std::uint32_t last = last_page(b);
      check(last < users.size(), "a live block lies beyond the page map");
      for (std::uint32_t i = first; i <= last; ++i) users[i]++;
    }
  };
  count_users(range_);
  for (const auto& region : regions_) count_users(region->pool);
  if (small_area_) count_users(*small_area_);
  std::size_t mapped = 0, idle = 0, shadow_count = 0;
  std::vector<std::uint64_t> physical;
  for (std::uint32_t i = 0; i < pages_.get_count(); ++i) {
    const page_map::page& p = pages_.get(i);
    const std::uint32_t users_now = pages_.get_users(i);
    const bool idle_now = pages_.is_idle(i);
    check(users_now == users[i], "a page's user count differs from the live blocks on it");
    // A block in flight (a small segment too) may wait on a page whose mapping by
    // another thread just failed, or that another thread unmapped; it finds the page
    // unmapped when it wakes and places itself again.
    check(users_now == 0 || p.physical || p.busy || blocks_in_flight, "a live byte is not mapped");
    check(idle_now == (p.physical && users_now == 0), "a page's idle mark is wrong");
    check(pages_.is_mapped(i) == (p.physical != 0),
          "the bitmap of mapped pages disagrees with the pages");
    check(!p.physical || !p.shadow, "a mapped page has a shadow");
    shadow_count += p.shadow != 0;
    check(pages_.is_usable(i) == (p.physical && !p.busy),
          "the bitmap of usable pages disagrees with the pages");
    if (p.physical) {
      ++mapped;
      // A group's pages share its physical page: counted once, at its first page.
      if (get_mapping_pages(i)) physical.push_back(p.physical);
    }
    idle += idle_now;
  }
  std::sort(physical.begin(), physical.end());
  check(std::adjacent_find(physical.begin(), physical.end()) == physical.end(),
        "one physical page is mapped twice: two blocks would share a byte");
  check(mapped == mapped_pages_, "the mapped-page count is wrong");
  check(shadow_count == pages_.get_shadow_count(), "the shadow count is wrong");
  // A busy shadow's page is on its way to a block being mapped.
  for (std::uint32_t i = 0; i < pages_.get_count() && !blocks_in_flight; ++i) {
    const page_map::page& p = pages_.get(i);
    check(!p.shadow || p.busy || std::binary_search(physical.begin(), physical.end(), p.shadow),
          "a shadow maps a physical page that no page holds");
  }
  check(idle == pages_.get_idle_count(), "the count of idle pages is wrong");
  for (const auto& [first, n] : group_pages_) {
    check(n > 1 && first + n <= pages_.get_count(), "a group is out of the page map");
    for (std::uint32_t m = first; m < first + n; ++m) {
      const page_map::page& p = pages_.get(m);
      check(get_group(m) == first, "a group's page names another group");
      check(p.physical == pages_.get(first).physical && p.physical != 0 && !p.shadow,
            "a group's page is not mapped to the group's physical page");
    }
  }
  std::size_t grouped = 0;
  for (std::uint32_t i = 0; i < group_of_.size(); ++i) grouped += group_of_[i] != page_map::kNone;
  std::size_t listed = 0;
  for (const auto& [first, n] : group_pages_) listed += n;
  check(grouped == listed, "a page is marked in a group that is not listed");
}

void arena::add_views(std::vector<segment_view>& views,
                      const std::unordered_set<const pools::block*>& parked) const {
  const std::size_t g = page_size_;
  // One view per run of mapped pages, with the blocks that lie on it.
  const block* b = range_.get_segments().front()->first;
  // The small area's pages under small segments show as the small pool's segments;
  // its idle ones here.
  std::uint32_t small_first = 1, small_last = 0;
  if (small_area_) {
    const pools::segment* area = small_area_->get_segments().front();
    small_first = page_of(area->base - base_);
    small_last = page_of(area->base - base_ + area->size - 1);
  }
  auto shown = [&](std::uint32_t i) {
    return pages_.get(i).physical &&
           (i < small_first || i > small_last || pages_.get_users(i) == 0);
  };
  for (std::uint32_t i = 0; i < pages_.get_count();) {
    if (!shown(i)) {
      ++i;
      continue;
    }
    std::uint32_t end = i;
    while (end < pages_.get_count() && shown(end)) ++end;
    segment_view v{base_ + i * g, (end - i) * g, false, {}};
    const std::size_t lo = i * g, hi = end * g;
    while (b && b->offset + b->size <= lo) b = static_cast<const block*>(b->next_range);
    auto add = [&](const block* x) {  // the part of x on the run, x's offset from the range
      const std::size_t at = x->owner->base - base_ + x->offset;
      const std::size_t from = std::max<std::size_t>(at, lo);
      const std::size_t to = std::min<std::size_t>(at + x->size, hi);
      const bool live = x->live && !parked.contains(x);
      if (from < to) v.blocks.push_back({from - lo, to - from, live ? x->requested : 0, live});
    };
    for (const block* x = b; x && x->offset < hi; x = static_cast<const block*>(x->next_range)) {
      if (x == small_place_) continue;
      const plan_region* region = find_region(x);
      if (!region) {
        add(x);
        continue;
      }
      // A region's placeholder: its own blocks instead.
      for (const block* y = region->pool.get_segments().front()->first; y;
           y = static_cast<const block*>(y->next_range))
        add(y);
    }
    views.push_back(std::move(v));
    i = end;
  }
}

}  // namespace memkit

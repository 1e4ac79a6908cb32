// The virtual-memory arena: large blocks placed in one reserved address range,
// physical pages mapped only under live blocks. Design and invariants:
// include/memkit/allocator.hpp.
//
// The caller's lock guards every method but those marked "without the lock",
// which call the backend and must run with it released. The arena reads the
// allocator only through what it is given: the fences (safe serials), and per
// request a budget; what it changes in the allocator's counters it returns.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <unordered_set>
#include <utility>
#include <vector>

#include "allocator/fences.hpp"
#include "memkit/allocator.hpp"
#include "placement/loop_plan.hpp"
#include "placement/page_map.hpp"
#include "pools/segment_pool.hpp"

namespace memkit {

// One page to map under a new block (or to give back): where, and which physical page.
struct page_plan {
  std::uint32_t index;                                     // page of the arena
  page_id physical;                                        // 0: create one (release: unmap only)
  std::uint32_t stolen_from = placement::page_map::kNone;  // map: the idle page it came from
                                                           // (left as its shadow); release:
                                                           // the page to unmap first
  bool unmap_shadow = false;  // map: the page's shadow is unmapped first
  std::uint32_t pages = 1;    // pages of the physical page from here: more than one
                              // for a group (0: a later page of the entry before's group)
  bool beside = false;        // map: a page of the plan's region beside the block, made
                              // with its group and left idle (arena::add_chunk_pages)
};

class arena {
 public:
  // What placing a block may use, from the allocator's counters.
  struct budget {
    std::size_t limit = 0;        // reserved bytes may not pass it
    std::size_t in_use = 0;       // reserved bytes, and bytes being reserved outside the lock
    std::size_t peak_active = 0;  // new pages are made while in_use <= get_growth_room(this)
  };
  // Pages a call mapped, unmapped, created and released: for the allocator's
  // counters (reserved bytes change by (created - released) pages).
  struct page_counts {
    std::size_t mapped = 0;
    std::size_t unmapped = 0;
    std::size_t created = 0;
    std::size_t released = 0;
    std::size_t moved = 0;     // pages that came from another place (stolen)
    std::size_t returned = 0;  // pages back where they were still mapped (no call)
    // Physical pages asked of the backend and given back: a group is one of many pages.
    std::size_t allocations = 0;
    std::size_t frees = 0;
  };
  // A block placed and the pages to map under it, between take and finish.
  struct request {
    pools::block* b = nullptr;     // the block placed in the range
    queue_id previous_queue = 0;   // the queue its free range had
    std::vector<page_plan> pages;  // pages to map under it
    // Idle pages it touches, as they were: a cancelled request leaves them so (their
    // last user's fence still guards them).
    struct idle_page {
      std::uint32_t index;
      std::uint32_t queue;
      std::uint64_t free_serial;
    };
    std::vector<idle_page> was_idle;
    // Pages that took back their shadow's physical page from its idle home (no call):
    // (page, home), undone by abandon.
    std::vector<std::pair<std::uint32_t, std::uint32_t>> reclaimed;
    // Idle groups given back (unmapped and released first, by map) to make room for
    // the pages it creates, in place of pages it would have stolen from them.
    std::vector<page_plan> dissolved;
    std::size_t groups_unmapped = 0;   // map: entries of `dissolved` unmapped and released
    std::uint32_t max_group = 1;       // most pages map() creates as one physical page
    std::size_t shadows_unmapped = 0;  // map: entries of `pages` past their shadow's unmap
    std::size_t creates = 0;           // physical pages to create
    std::size_t reserving = 0;      // their bytes: reserved, for the caller, until finish/abandon
    std::size_t past_slack = 0;     // pages it steals or creates past the slack's room
    std::size_t shortfall = 0;      // bytes over the limit, when it failed
    bool must_wait = false;         // another thread is mapping one of its pages
    bool lent = false;              // placed in a plan's region by take_lent
    bool small_segment = false;     // a small segment's page (take_small_segment): its block
                                    // is the small pool's segment, never a live block
    bool wait_would_help = false;   // past the slack, while idle pages wait on this queue's work
    std::uint64_t wait_serial = 0;  // then: frees on this queue up to here give enough of them
  };

  // One program request as the loop plan saw it: noted once, however often the
  // allocator retries it.
  struct loop_note {
    bool noted = false;
    std::uint64_t serial = 0;                            // in the loop plan
    std::uint64_t offset = placement::loop_plan::kNone;  // planned offset in the region
  };

  // Without the lock: reserves a range of 8x the device's memory (halved until the
  // backend agrees); null when it has no addresses. `slack`: see arena_slack.
  static std::unique_ptr<arena> create(backend& device, const device_facts& facts,
                                       const fence_tracker& fences, double slack);
  arena(backend& device, const fence_tracker& fences, double slack, address_t base,
        std::size_t size, std::size_t page_size);
  ~arena();  // without the lock: unmaps and releases every page, then the range
  arena(const arena&) = delete;
  arena& operator=(const arena&) = delete;

  // Places a block and plans its pages (stealing idle pages, highest first, for what
  // the slack does not allow to create) within the budget's limit.
  // On failure changes no page and sets shortfall.
  // A request of a learned loop goes to its planned place in the plan's region
  // when that is free (placement/loop_plan.hpp); any other, or one whose place is
  // still in use, is placed online.
  bool take(std::size_t size, queue_id queue, const budget& room, loop_note& note, request& r);
  // The same for a request that is never retried.
  bool take(std::size_t size, queue_id queue, const budget& room, request& r) {
    loop_note note;
    return take(size, queue, room, note, r);
  }
  // Without the lock: unmaps stolen pages, creates and maps the rest. False when
  // the backend had no room for a new page or a call failed.
  bool map(request& r);
  // Records the mapping, or undoes the request when mapping failed (the physical
  // pages in hand go to `to_release`, for give_back).
  page_counts finish(request& r, bool mapped, std::vector<page_plan>& to_release);
  // Gives the block back and drops its pages' users.
  void cancel(request& r);
  // Undoes a plan before any backend call was made.
  void abandon(request& r);
  // Frees a live (or deferred) block. Whether the caller should record a fence
  // after it: it left pages idle while pages move, and the queue's fences want one
  // (fence_tracker::wants_record).
  bool free(pools::block* b, std::uint64_t serial);
  // While no page of the block is being mapped; then whether all are mapped.
  bool is_settled(const pools::block* b) const;
  bool is_mapped(const pools::block* b) const;

  // Bytes of idle pages whose work completed.
  std::size_t calculate_releasable() const;
  // The serial of the free on `queue` after which `pages` more idle pages (or all
  // there are) have completed work; 0 when none waits on that queue.
  std::uint64_t calculate_wait_serial(queue_id queue, std::size_t pages) const;
  // Takes such idle pages out, least recently used first (the current plan's region's
  // last), until at least `bytes` are (or none is left).
  page_counts release_idle(std::size_t bytes, std::vector<page_plan>& out);
  // Before the cache is emptied (allocator::clear_cache): the pages made again until
  // the arena holds as many as now are made in groups (kRegrowGroupPages), a call
  // for many pages, for a program that empties its cache every step remakes them all.
  void note_emptying() { regrow_until_ = std::max(regrow_until_, mapped_pages_ + held_unmapped_); }
  // Without the lock: unmaps (where stolen_from is set) and releases the pages.
  void give_back(const std::vector<page_plan>& pages);
  // After give_back, with the lock: the pages it unmapped may be mapped again (until
  // then they are busy, so that no block maps a page over one not yet unmapped).
  void settle_released(const std::vector<page_plan>& pages);

  void merge_unmerged();
  // Reserved bytes new pages may bring the total to: (1 + kSlackAim x slack) x
  // peak_active. Reserved overshoots the room by the pages a new peak's block maps
  // and the requests' rounding (active over requested bytes): aimed a fortieth inside
  // the slack, a loop that fills its slack stays within it (2%: reserved at most
  // 1.02 x the peak of requested bytes; docs/BENCHMARKS.md).
  static constexpr double kSlackAim = 0.975;
  std::size_t get_growth_room(std::size_t peak_active) const {
    return static_cast<std::size_t>(static_cast<double>(peak_active) * (1.0 + kSlackAim * slack_));
  }
  // Before any block: the addresses of the small area, for small segments
  // (allocator_options::small_segments_in_arena), apart from the large blocks.
  void make_small_area();
  // A block of one page in the small area, for a small segment; its page is planned
  // as take() plans a block's. False when the area is full. Freed with free().
  bool take_small_segment(queue_id queue, const budget& room, request& r);
  static constexpr std::size_t kSmallAreaPages = 1024;  // addresses only
  // Told of pages that come to hold memory or stop to (allocator_options::pages).
  void set_listener(page_listener* listener) { listener_ = listener; }
  // A request handed out with no page to map: its pages taken back from shadows
  // count, and are told. Returns how many.
  std::size_t commit_returns(request& r);
  // Whether requests go through the loop plan (allocator_options::plan_loops).
  void set_loop_planning(bool on) { plan_loops_ = on; }
  // The pool a block of the arena belongs to: the range or a plan's region.
  pools::segment_pool& pool_of(const pools::block* b);
  const placement::loop_plan& get_loop_plan() const { return loop_; }
  std::size_t get_page_size() const { return page_size_; }
  // Adds the range's blocks to the counts (as segment_pool::validate); returns the
  // reserved bytes (mapped pages and pages in flight).
  std::size_t recount(std::size_t* live_bytes, std::size_t* live_blocks,
                      std::size_t* requested) const;
  // Throws invariant_violation. With blocks in flight, a live page may be unmapped.
  void validate(bool blocks_in_flight) const;
  // One view per run of mapped pages; blocks in `parked` (held back by thread caches)
  // show as free.
  void add_views(std::vector<segment_view>& views,
                 const std::unordered_set<const pools::block*>& parked) const;

 private:
  // A region where a learned loop's blocks go: a pool over a block of the range
  // that the range keeps live (a placeholder, not an allocation).
  struct plan_region {
    explicit plan_region(pools::reuse_view reuse) : pool(false, reuse) {}
    pools::block* placeholder = nullptr;  // its place in the range
    pools::segment_pool pool;             // the planned blocks, at the plan's offsets
    queue_id queue = 0;                   // the plan's queue, the only one placing there
  };
  // Makes the plan's region, or hands it the last one when that is empty and large
  // enough.
  void make_region(queue_id queue);
  // No block of the region is live or waits on a fence; but, with but_lent, blocks
  // lent to online requests (take_lent) may be live.
  bool is_empty(const plan_region& region, bool but_lent = false) const;
  // Gives back to the range the placeholders of regions no plan uses any more
  // whose blocks have all gone (while one queue uses the arena: then their
  // addresses are reusable at once on it).
  void retire_empty_regions();
  bool is_current(const plan_region& region) const {
    return &region == regions_.back().get() && loop_.is_region_ready();
  }
  pools::block* take_planned(std::uint64_t offset, std::size_t size, queue_id queue,
                             queue_id* previous_queue);
  // The region whose placeholder b is, or nullptr.
  const plan_region* find_region(const pools::block* placeholder) const;
  pools::block* take_online(std::size_t size, queue_id queue, request& r);
  // Whether the work of idle page i's last user completed: only then may the page move
  // or go back (unmapping is ordered on no queue).
  bool has_completed(std::uint32_t i) const {
    return fences_.is_safe(pages_.get_queue(i), pages_.get_free_serial(i));
  }
  // Idle pages whose work completed, for a block on [first, last] to move under it,
  // until `wanted` (into stolen); idle pages on `queue` still in use go to waiting.
  void find_victims(std::uint32_t first, std::uint32_t last, queue_id queue, std::size_t wanted,
                    std::vector<std::uint32_t>& stolen, std::vector<std::uint64_t>& waiting) const;
  // Counts the pages under a placed block and plans the ones to map (see take).
  bool plan_pages(pools::block* b, queue_id queue, const budget& room, request& r);
  // Of the unmapped pages of [first, last], `shadowed` with a shadow: up to `most` take
  // their physical page back from an idle home (reclaim). Returns how many did.
  std::size_t reclaim_shadows(std::uint32_t first, std::uint32_t last, std::size_t shadowed,
                              std::size_t most, request& r);
  // The block on [first, last] gets its pages' users, and r.pages a plan for each page
  // it needs: the stolen ones first (their old places left as shadows), then new ones.
  void record_pages(std::uint32_t first, std::uint32_t last,
                    const std::vector<std::uint32_t>& stolen, request& r);
  // Where page i's shadow can come back from at no cost: its home, which holds it
  // idle, outside [first, last], its last work there completed; else kNone.
  std::uint32_t find_reclaimable_home(std::uint32_t i, std::uint32_t first,
                                      std::uint32_t last) const;
  // The page that holds page i's shadow now, following the shadows it left; kNone.
  std::uint32_t find_home(std::uint32_t i) const;
  // Moves page i's shadow's physical page back to i from its home h.
  void reclaim(std::uint32_t i, std::uint32_t h);
  void undo_reclaims(request& r);    // moves them back to their homes
  void restore_victims(request& r);  // stolen pages back to the idle pages they came from
  // While pages are made again after an emptying, a block of the current plan's region
  // that makes pages also makes, up to `most` pages, the region's other missing pages
  // of the kRegrowChunkPages-page chunks it touches, in the same groups.
  void add_chunk_pages(std::uint32_t first, std::uint32_t last, std::size_t most, request& r);
  // Groups outside [first, last] whose every page is idle, its work completed (the
  // current plan's region's last), until `wanted` pages, into r.dissolved: they go back
  // whole (map() unmaps and releases them) where single pages would have been stolen.
  // Returns their pages. Idle groups whose work on `queue` is still running add, for
  // each of their pages, the serial of their last free to `waiting`, as find_victims
  // does for single pages: the request may wait for that work rather than grow.
  std::size_t dissolve_groups(std::uint32_t first, std::uint32_t last, queue_id queue,
                              std::size_t wanted, request& r, std::vector<std::uint64_t>& waiting);
  void restore_groups(request& r);  // undoes dissolve_groups
  // Every page of the group idle, not busy, its work completed: it may go back.
  bool is_group_free(std::uint32_t first) const;
  // A group of n pages, every one idle and not busy, whose work not yet completed is
  // on `queue` only: n times the serial of its last such free, into waiting.
  void note_group_wait(std::uint32_t first, std::uint32_t n, queue_id queue,
                       std::vector<std::uint64_t>& waiting) const;
  void tell(std::uint32_t page, bool held) {
    if (listener_) listener_->on_pages(base_ + std::size_t{page} * page_size_, page_size_, held);
  }
  // The current plan's region's pages, whose idle pages are taken last; (1, 0) when
  // there is none.
  std::pair<std::uint32_t, std::uint32_t> get_kept_pages() const {
    if (regions_.empty() || !is_current(*regions_.back())) return {1, 0};
    return {first_page(regions_.back()->placeholder), last_page(regions_.back()->placeholder)};
  }
  // Calls visit(page) for each idle page, least recently used first and the current
  // region's last, until it returns false; visit may take the page it is given.
  template <class Visit>
  void visit_idle_by_age(Visit&& visit);
  pools::block* take_most_mapped(std::size_t size, queue_id queue, queue_id* previous_queue);
  pools::block* take_tightest_run(std::size_t size, queue_id queue, queue_id* previous_queue);
  // An online block's place in a plan's region that no plan uses now, or null.
  pools::block* take_lent(std::size_t size, queue_id queue, queue_id* previous_queue);
  template <class F>
  void visit_usable_runs(std::uint64_t range_start, std::uint64_t range_end, std::size_t& scan_left,
                         F&& f) const;
  std::uint32_t page_of(std::size_t offset) const {
    return static_cast<std::uint32_t>(offset >> page_shift_);
  }
  // A block's offset is from its segment: the range's, or a region's inside it.
  std::uint32_t first_page(const pools::block* b) const {
    return page_of(b->owner->base - base_ + b->offset);
  }
  std::uint32_t last_page(const pools::block* b) const {
    return page_of(b->owner->base - base_ + b->offset + b->size - 1);
  }

  backend& device_;
  const fence_tracker& fences_;
  const double slack_;
  const address_t base_;                // start of the reserved range
  const std::size_t size_;              // bytes of the range
  const std::size_t page_size_;         // the backend's granularity (a power of two)
  const std::uint32_t page_shift_;      // log2(page_size_)
  pools::segment_pool range_;           // placement of blocks in the range (a single segment)
  placement::page_map pages_;           // one entry per page of the range
  std::size_t mapped_pages_ = 0;        // pages with a physical page mapped now
  std::size_t held_unmapped_ = 0;       // stolen pages between plan and map (still reserved)
  page_listener* listener_ = nullptr;   // told of pages held and unheld
  std::uint32_t fences_wanted_ = 0;     // frees that leave pages idle and record a fence,
                                        // left (reset while pages move or requests wait)
  bool placed_any_ = false;             // a block was ever placed
  queue_id sole_queue_ = 0;             // the queue of every block so far, while only_one_queue_
  bool only_one_queue_ = true;          // then free ranges merge by queue (segment_pool::can_merge)
  bool plan_loops_ = true;              // requests go through loop_
  std::uint64_t moves_ = 0;             // pages stolen and waits for them, so far
  std::uint64_t moves_at_start_ = 0;    // moves_ when the loop's last repetition began
  std::uint64_t last_free_serial_ = 0;  // the serial of the last free
  std::vector<std::unique_ptr<plan_region>> regions_;  // the current plan's is last
  std::size_t regrow_until_ = 0;         // pages held when the cache was last emptied;
                                         // 0 once held again
  std::vector<std::uint32_t> group_of_;  // per page: its group's first page, or kNone
  std::map<std::uint32_t, std::uint32_t> group_pages_;  // first page: pages

  std::uint32_t get_group(std::uint32_t i) const {
    return i < group_of_.size() ? group_of_[i] : placement::page_map::kNone;
  }
  void add_group(std::uint32_t first, std::uint32_t pages) {
    if (group_of_.size() < first + pages)
      group_of_.resize(first + pages, placement::page_map::kNone);
    std::fill_n(group_of_.begin() + first, pages, first);
    group_pages_[first] = pages;
  }
  // Pages of the device's mapping that starts at page i: a group's at its first page,
  // 0 at its others, 1 for a single page.
  std::uint32_t get_mapping_pages(std::uint32_t i) const {
    const std::uint32_t group = get_group(i);
    if (group == placement::page_map::kNone) return 1;
    return group == i ? group_pages_.at(i) : 0;
  }
  // Unmaps a group in the page map (its pages busy until the device unmaps it) and
  // forgets it; returns its pages.
  std::uint32_t take_out_group(std::uint32_t first);
  std::unique_ptr<pools::segment_pool> small_area_;  // small segments' pages, made at the first
  pools::block* small_place_ = nullptr;              // its place in the range
  placement::loop_plan loop_;  // learns a repeating sequence of requests and plans it
};

}  // namespace memkit

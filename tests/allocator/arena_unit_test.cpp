// The arena through its own interface: a fence tracker, a sim backend and the
// budget the allocator would pass; the test keeps the counters the allocator would.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "allocator/arena.hpp"
#include "memkit/adaptors/fault_injection.hpp"
#include "memkit/memkit.hpp"

namespace memkit {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;
constexpr std::size_t kPage = 2 * MiB;  // the sim's granularity

struct arena_test {
  explicit arena_test(double slack, std::size_t capacity = std::size_t{1} << 30)
      : device(make_options(capacity)),
        faults(device),
        vm(arena::create(faults, faults.get_facts(), fences, slack)) {}

  static sim_options make_options(std::size_t capacity) {
    sim_options o;
    o.capacity = capacity;
    o.queue_count = 1;
    return o;
  }

  arena::budget room() const { return {std::size_t{1} << 40, reserved, peak_active}; }

  void count(const arena::page_counts& c) {
    reserved = reserved + c.created * kPage - c.released * kPage;
    maps += c.mapped;
    unmaps += c.unmapped;
    moves += c.moved;
  }

  // take, map and finish, as the allocator's slow path does.
  pools::block* place(std::size_t size, arena::request* kept = nullptr) {
    arena::request r;
    EXPECT_TRUE(vm->take(size, 0, room(), r));
    if (!r.b) return nullptr;
    std::vector<page_plan> to_release;
    count(vm->finish(r, vm->map(r), to_release));
    EXPECT_TRUE(to_release.empty());
    EXPECT_TRUE(vm->is_settled(r.b) && vm->is_mapped(r.b));
    pools::block* b = r.b;
    active += b->size;
    peak_active = std::max(peak_active, active);
    if (kept) *kept = std::move(r);
    return b;
  }

  void free(pools::block* b) {
    active -= b->size;
    ++serial;
    fences.note_free(b->queue, serial);
    vm->free(b, serial);
  }

  // Every free so far is known complete.
  void complete_all() {
    const fence_tracker::refresh_plan plan = fences.plan_refresh(serial);
    fences.apply_refresh(plan, std::vector<std::uint64_t>(plan.record.size(), 1),
                         std::vector<std::uint64_t>(plan.poll.size(), 1));
  }

  std::uint32_t page_of(const pools::block* b) const {
    return static_cast<std::uint32_t>(b->offset / kPage);
  }

  sim_backend device;
  fault_injection_adaptor faults;  // passes every call through unless a test says
  fence_tracker fences{1};
  std::unique_ptr<arena> vm;
  std::size_t reserved = 0, active = 0, peak_active = 0, maps = 0, unmaps = 0, moves = 0;
  std::uint64_t serial = 0;
};

// The reserved bytes the arena counts from its pages.
std::size_t recounted(const arena& vm) {
  std::size_t live_bytes = 0, live_blocks = 0, requested = 0;
  return vm.recount(&live_bytes, &live_blocks, &requested);
}

// The layout of mapped pages and the blocks on them, comparable.
std::vector<std::size_t> layout(const arena& vm) {
  std::vector<segment_view> views;
  vm.add_views(views, {});
  std::vector<std::size_t> out;
  for (const segment_view& v : views) {
    out.push_back(v.base);
    out.push_back(v.size);
    for (const block_view& b : v.blocks) {
      out.insert(out.end(), {b.offset, b.size, b.requested, std::size_t{b.live}});
    }
  }
  return out;
}

TEST(arena_unit, placement_reuses_mapped_pages) {
  arena_test t(0.0);
  ASSERT_TRUE(t.vm);
  pools::block* a = t.place(8 * MiB);
  EXPECT_EQ(t.maps, 4u);
  EXPECT_EQ(t.reserved, 8 * MiB);
  const std::size_t offset = a->offset;
  t.free(a);
  arena::request r;
  ASSERT_TRUE(t.vm->take(8 * MiB, 0, t.room(), r));
  EXPECT_EQ(r.b->offset, offset);
  EXPECT_TRUE(r.pages.empty()) << "its pages are mapped already";
  EXPECT_FALSE(r.must_wait);
  EXPECT_EQ(r.reserving, 0u);
  EXPECT_TRUE(t.vm->is_mapped(r.b));
  EXPECT_NO_THROW(t.vm->validate(false));
}

// A 16 MiB hole (8 idle pages) beside 8 MiB in use, and a 20 MiB request that
// does not fit in the hole: new pages only within the slack, the rest moved.
TEST(arena_unit, the_slack_bounds_reserved) {
  for (const double slack : {0.0, 0.25, 1.0}) {
    arena_test t(slack);
    pools::block* a = t.place(16 * MiB);
    pools::block* b = t.place(8 * MiB);
    t.free(a);
    t.complete_all();
    arena::request r;
    ASSERT_TRUE(t.vm->take(20 * MiB, 0, t.room(), r));
    const auto stolen = std::count_if(r.pages.begin(), r.pages.end(), [](const page_plan& p) {
      return p.stolen_from != placement::page_map::kNone;
    });
    // Room for (1 + slack) * 24 MiB - 24 MiB in new pages, aimed a fortieth inside.
    const std::size_t room_pages =
        static_cast<std::size_t>(24.0 * slack * arena::kSlackAim * MiB) / kPage;
    const std::size_t creates = std::min<std::size_t>(10, std::max<std::size_t>(room_pages, 2));
    EXPECT_EQ(r.creates, creates) << "slack " << slack;
    EXPECT_EQ(static_cast<std::size_t>(stolen), 10 - creates) << "slack " << slack;
    EXPECT_EQ(r.reserving, creates * kPage);
    std::vector<page_plan> to_release;
    t.count(t.vm->finish(r, t.vm->map(r), to_release));
    t.active += r.b->size;
    t.peak_active = std::max(t.peak_active, t.active);
    EXPECT_EQ(t.moves, 10 - creates);
    EXPECT_EQ(t.unmaps, 0u) << "moved pages stay mapped where they were, as shadows";
    EXPECT_LE(static_cast<double>(t.reserved),
              std::max(1.0 + slack, 1.0) * static_cast<double>(t.peak_active) + 1.0);
    EXPECT_EQ(recounted(*t.vm), t.reserved);
    EXPECT_NO_THROW(t.vm->validate(false));
    t.free(b);
  }
}

// A block of many pages goes to the shortest run of mapped pages that holds it, not
// to the smallest free range: the free range of 30 MiB has 8 mapped pages, the one of
// 20 MiB 10. A 16 MiB block takes the 8, and a 20 MiB block after it still finds its
// 10 whole; neither maps a page.
TEST(arena_unit, a_large_block_takes_the_shortest_mapped_run_that_holds_it) {
  arena_test t(0.02);
  ASSERT_TRUE(t.vm);
  pools::block* x = t.place(14 * MiB);  // pages 0-6
  pools::block* y = t.place(16 * MiB);  // pages 7-14
  t.place(2 * MiB);                     // page 15, stays
  pools::block* z = t.place(20 * MiB);  // pages 16-25
  t.place(2 * MiB);                     // page 26, stays
  ASSERT_EQ(y->offset, 14 * MiB);
  ASSERT_EQ(z->offset, 32 * MiB);
  t.free(x);
  t.free(y);
  t.complete_all();
  std::vector<page_plan> released;
  t.count(t.vm->release_idle(14 * MiB, released));  // x's pages, the least recently idle
  t.vm->give_back(released);
  t.vm->settle_released(released);
  ASSERT_EQ(released.size(), 7u);
  t.free(z);
  t.complete_all();
  arena::request r;
  ASSERT_TRUE(t.vm->take(16 * MiB, 0, t.room(), r));
  EXPECT_EQ(r.b->offset, 14 * MiB) << "the run of 8 mapped pages, inside the larger free range";
  EXPECT_TRUE(r.pages.empty());
  std::vector<page_plan> to_release;
  t.count(t.vm->finish(r, t.vm->map(r), to_release));
  arena::request next;
  ASSERT_TRUE(t.vm->take(20 * MiB, 0, t.room(), next));
  EXPECT_EQ(next.b->offset, 32 * MiB);
  EXPECT_TRUE(next.pages.empty()) << "the run of 10 mapped pages was left whole";
  t.count(t.vm->finish(next, t.vm->map(next), to_release));
  EXPECT_EQ(t.unmaps, 7u);  // only the release
  EXPECT_EQ(recounted(*t.vm), t.reserved);
  EXPECT_NO_THROW(t.vm->validate(false));
}

// Idle pages move from the top down: the mapped runs below stay whole. (Released
// pages still go least recently used first.)
TEST(arena_unit, idle_pages_are_stolen_highest_first) {
  arena_test t(0.0);
  // One-page blocks, each between live ones: no hole fits two pages.
  std::vector<pools::block*> blocks;
  for (int i = 0; i < 7; ++i) blocks.push_back(t.place(kPage));
  pools::block* x = blocks[1];
  pools::block* y = blocks[3];
  pools::block* w = blocks[5];
  const std::uint32_t x_page = t.page_of(x), y_page = t.page_of(y), w_page = t.page_of(w);
  t.free(w);
  t.free(x);
  t.free(y);
  t.complete_all();
  arena::request r;
  ASSERT_TRUE(t.vm->take(2 * kPage, 0, t.room(), r));
  ASSERT_EQ(r.pages.size(), 2u);
  EXPECT_EQ(r.pages[0].stolen_from, w_page) << "the highest idle page first";
  EXPECT_EQ(r.pages[1].stolen_from, y_page);
  EXPECT_EQ(r.creates, 0u);
  std::vector<page_plan> to_release;
  t.count(t.vm->finish(r, t.vm->map(r), to_release));
  EXPECT_EQ(t.vm->calculate_releasable(), kPage) << "only x's page stays idle";
  std::vector<page_plan> released;
  t.count(t.vm->release_idle(1, released));
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].index, x_page);
  t.vm->give_back(released);
  t.vm->settle_released(released);
  EXPECT_EQ(recounted(*t.vm), t.reserved);
  EXPECT_NO_THROW(t.vm->validate(false));
}

// A released page is unmapped with the lock released: until then no request maps a
// page at its address (the device would refuse it, or the late unmap take the new one).
TEST(arena_unit, a_released_page_is_not_mapped_again_before_it_is_unmapped) {
  arena_test t(0.0);
  pools::block* x = t.place(kPage);
  t.place(kPage);  // keeps x's range apart from the free top
  const std::uint32_t x_page = t.page_of(x);
  t.free(x);
  t.complete_all();
  std::vector<page_plan> released;
  t.count(t.vm->release_idle(kPage, released));
  ASSERT_EQ(released.size(), 1u);
  arena::request r;
  ASSERT_TRUE(t.vm->take(kPage, 0, t.room(), r));
  ASSERT_EQ(t.page_of(r.b), x_page);
  EXPECT_TRUE(r.must_wait) << "the page is still being unmapped";
  EXPECT_TRUE(r.pages.empty()) << "no page is planned over it";
  EXPECT_FALSE(t.vm->is_settled(r.b));
  t.vm->give_back(released);
  t.vm->settle_released(released);
  EXPECT_TRUE(t.vm->is_settled(r.b));
  EXPECT_FALSE(t.vm->is_mapped(r.b));
  t.vm->cancel(r);  // placed again, the page is planned now
  pools::block* again = t.place(kPage);
  EXPECT_EQ(t.page_of(again), x_page);
  EXPECT_EQ(recounted(*t.vm), t.reserved);
  EXPECT_NO_THROW(t.vm->validate(false));
}

// Gives back every idle page, as clear_cache does.
void release_all(arena_test& t, std::vector<page_plan>& released) {
  t.complete_all();
  t.vm->note_emptying();
  t.count(t.vm->release_idle(std::size_t{1} << 40, released));
  t.vm->give_back(released);
  t.vm->settle_released(released);
}

// Pages given back (an emptied cache) are made again in groups, a physical page and
// a mapping for many pages, until the arena holds as many as before; a group goes
// back whole.
TEST(arena_unit, pages_given_back_are_made_again_in_groups) {
  arena_test t(0.0);
  pools::block* a = t.place(40 * kPage);
  EXPECT_EQ(t.device.get_counters().pages_created, 40u) << "the first pages: one each";
  t.free(a);
  std::vector<page_plan> released;
  release_all(t, released);
  EXPECT_EQ(t.reserved, 0u);
  const sim_counters before = t.device.get_counters();
  a = t.place(40 * kPage);
  const sim_counters after = t.device.get_counters();
  EXPECT_EQ(after.pages_created - before.pages_created, 3u) << "16 + 16 + 8 pages";
  EXPECT_EQ(after.maps - before.maps, 3u);
  EXPECT_EQ(after.page_bytes, 40 * kPage);
  EXPECT_EQ(t.reserved, 40 * kPage);
  EXPECT_EQ(recounted(*t.vm), t.reserved);
  EXPECT_NO_THROW(t.vm->validate(false));
  // Held as before: new pages are single again.
  pools::block* b = t.place(kPage);
  EXPECT_EQ(t.device.get_counters().pages_created - after.pages_created, 1u);
  t.free(a);
  released.clear();
  release_all(t, released);
  ASSERT_EQ(released.size(), 3u) << "one entry a group";
  EXPECT_EQ(released[0].pages + released[1].pages + released[2].pages, 40u);
  EXPECT_EQ(t.device.get_counters().page_bytes, kPage) << "b's page stays";
  EXPECT_EQ(t.reserved, kPage);
  EXPECT_EQ(recounted(*t.vm), t.reserved);
  EXPECT_NO_THROW(t.vm->validate(false));
  t.free(b);
}

// A device that refused a group's physical allocation gets the pages one at a time
// again: a group asks for more contiguous memory than any one page.
TEST(arena_unit, a_refused_group_makes_pages_one_at_a_time_again) {
  arena_test t(0.0);
  t.free(t.place(40 * kPage));
  std::vector<page_plan> released;
  release_all(t, released);
  fault_schedule next_create;
  next_create.calls = {1};
  t.faults.set_vm_schedule(next_create, vm_create_page);
  arena::request r;
  ASSERT_TRUE(t.vm->take(40 * kPage, 0, t.room(), r));
  EXPECT_FALSE(t.vm->map(r)) << "the first group's physical allocation is refused";
  std::vector<page_plan> to_release;
  t.count(t.vm->finish(r, false, to_release));
  t.vm->give_back(to_release);
  EXPECT_EQ(t.reserved, 0u);
  const sim_counters before = t.device.get_counters();
  pools::block* a = t.place(40 * kPage);
  EXPECT_EQ(t.device.get_counters().pages_created - before.pages_created, 40u);
  EXPECT_EQ(t.reserved, 40 * kPage);
  EXPECT_EQ(recounted(*t.vm), t.reserved);
  EXPECT_NO_THROW(t.vm->validate(false));
  t.free(a);
}

// 32 pages made again after an emptying (two idle groups of 16, their work completed)
// below a live one-page block, which it returns: a larger block goes above it.
pools::block* make_idle_groups_below(arena_test& t) {
  t.free(t.place(32 * kPage));
  std::vector<page_plan> released;
  release_all(t, released);
  pools::block* a = t.place(32 * kPage);
  pools::block* d = t.place(kPage);
  t.free(a);
  t.complete_all();
  return d;
}

// Where a block past the slack would steal idle pages, an idle group goes back whole
// instead (its pages cannot move alone), and the block's pages are made new: the
// device holds no more than stealing would have kept.
TEST(arena_unit, an_idle_group_goes_back_whole_where_its_pages_would_move) {
  arena_test t(0.0);
  pools::block* d = make_idle_groups_below(t);
  const sim_counters before = t.device.get_counters();
  pools::block* b = t.place(40 * kPage);  // past the peak: 40 pages, none to steal
  EXPECT_GT(t.page_of(b), t.page_of(d));
  const sim_counters after = t.device.get_counters();
  EXPECT_EQ(after.pages_released - before.pages_released, 2u) << "a's two groups, whole";
  EXPECT_EQ(after.page_bytes, 41 * kPage) << "d's page and b's";
  EXPECT_EQ(t.reserved, 41 * kPage);
  EXPECT_EQ(recounted(*t.vm), t.reserved);
  EXPECT_EQ(t.vm->calculate_releasable(), 0u);
  EXPECT_NO_THROW(t.vm->validate(false));
  t.free(b);
  t.free(d);
}

// Idle groups whose work on this queue has not completed cannot go back yet: a block
// past the slack waits for that work (as for single idle pages), rather than grow.
TEST(arena_unit, idle_groups_behind_this_queues_work_make_a_request_wait_not_grow) {
  arena_test t(0.0);
  t.free(t.place(32 * kPage));
  std::vector<page_plan> released;
  release_all(t, released);
  pools::block* a = t.place(32 * kPage);
  pools::block* d = t.place(kPage);
  t.free(a);  // its work not known complete
  const std::uint64_t a_freed = t.serial;
  arena::request r;
  ASSERT_TRUE(t.vm->take(40 * kPage, 0, t.room(), r));
  EXPECT_TRUE(r.dissolved.empty()) << "its groups' work is still running";
  EXPECT_TRUE(r.wait_would_help);
  EXPECT_EQ(r.wait_serial, a_freed);
  t.vm->abandon(r);
  EXPECT_NO_THROW(t.vm->validate(false));
  t.complete_all();
  ASSERT_TRUE(t.vm->take(40 * kPage, 0, t.room(), r));
  EXPECT_EQ(r.dissolved.size(), 2u) << "once it completed, both go back whole";
  EXPECT_FALSE(r.wait_would_help);
  t.vm->abandon(r);
  t.free(d);
}

// A request whose dissolved groups it never unmapped (given up before the backend
// ran) leaves them as they were.
TEST(arena_unit, an_abandoned_request_keeps_the_groups_it_would_have_given_back) {
  arena_test t(0.0);
  pools::block* d = make_idle_groups_below(t);
  const std::vector<std::size_t> was = layout(*t.vm);
  arena::request r;
  ASSERT_TRUE(t.vm->take(40 * kPage, 0, t.room(), r));
  EXPECT_EQ(r.dissolved.size(), 2u);
  t.vm->abandon(r);
  EXPECT_EQ(layout(*t.vm), was);
  EXPECT_EQ(recounted(*t.vm), t.reserved);
  EXPECT_EQ(t.vm->calculate_releasable(), 32 * kPage);
  EXPECT_NO_THROW(t.vm->validate(false));
  t.free(d);
}

// A group made before the device ran out goes back to the caller whole.
TEST(arena_unit, a_failed_mapping_hands_back_the_groups_it_made) {
  arena_test t(0.0, 32 * kPage);
  t.free(t.place(20 * kPage));
  std::vector<page_plan> released;
  release_all(t, released);
  const address_t other = t.device.allocate_segment(14 * kPage);  // another user's memory
  ASSERT_NE(other, 0u);
  arena::request r;
  ASSERT_TRUE(t.vm->take(20 * kPage, 0, t.room(), r));
  const bool mapped = t.vm->map(r);  // 16 pages made, then no room for 4 more
  EXPECT_FALSE(mapped);
  std::vector<page_plan> to_release;
  const arena::page_counts c = t.vm->finish(r, mapped, to_release);
  ASSERT_EQ(to_release.size(), 1u);
  EXPECT_EQ(to_release[0].pages, 16u);
  EXPECT_EQ(c.created, 16u);
  EXPECT_EQ(c.released, 16u);
  t.vm->give_back(to_release);
  t.count(c);
  EXPECT_EQ(t.device.get_counters().page_bytes, 0u);
  EXPECT_EQ(t.reserved, 0u);
  EXPECT_EQ(recounted(*t.vm), 0u);
  EXPECT_NO_THROW(t.vm->validate(false));
  t.device.free_segment(other, 14 * kPage);
}

// An idle page whose last user's work has not completed stays where it is; the
// request says that waiting for this queue's work would give it the page.
TEST(arena_unit, an_idle_page_moves_only_once_its_work_completed) {
  arena_test t(0.0);
  pools::block* a = t.place(kPage);
  pools::block* b = t.place(kPage);
  t.free(a);
  arena::request r;
  ASSERT_TRUE(t.vm->take(2 * kPage, 0, t.room(), r));
  EXPECT_EQ(r.creates, 2u);
  EXPECT_TRUE(r.wait_would_help);
  EXPECT_EQ(r.wait_serial, t.serial);
  t.vm->abandon(r);
  t.complete_all();
  ASSERT_TRUE(t.vm->take(2 * kPage, 0, t.room(), r = {}));
  EXPECT_EQ(r.creates, 1u) << "one page moved";
  EXPECT_FALSE(r.wait_would_help);
  t.vm->abandon(r);
  t.free(b);
  EXPECT_NO_THROW(t.vm->validate(false));
}

TEST(arena_unit, a_cancelled_request_restores_state) {
  arena_test t(0.0);
  pools::block* a = t.place(8 * MiB);
  pools::block* b = t.place(8 * MiB);
  t.free(a);
  t.complete_all();
  const std::vector<std::size_t> before = layout(*t.vm);
  const std::size_t releasable = t.vm->calculate_releasable();
  const std::size_t reserved = recounted(*t.vm);

  // Abandoned before any backend call: the stolen pages go back where they were.
  arena::request r;
  ASSERT_TRUE(t.vm->take(12 * MiB, 0, t.room(), r));
  EXPECT_EQ(r.creates, 2u);
  EXPECT_NO_THROW(t.vm->validate(false));
  t.vm->abandon(r);
  EXPECT_EQ(layout(*t.vm), before);
  EXPECT_EQ(t.vm->calculate_releasable(), releasable);
  EXPECT_EQ(recounted(*t.vm), reserved);
  EXPECT_NO_THROW(t.vm->validate(false));

  // Placed on mapped pages and cancelled: the block goes, its pages stay idle.
  ASSERT_TRUE(t.vm->take(8 * MiB, 0, t.room(), r = {}));
  ASSERT_TRUE(r.pages.empty());
  t.vm->cancel(r);
  EXPECT_EQ(layout(*t.vm), before);
  EXPECT_EQ(t.vm->calculate_releasable(), releasable) << "their fences still hold";

  // Over the limit: nothing changes.
  arena::budget tight = t.room();
  tight.limit = t.reserved;
  ASSERT_FALSE(t.vm->take(40 * MiB, 0, tight, r = {}));
  EXPECT_GT(r.shortfall, 0u);
  EXPECT_EQ(layout(*t.vm), before);
  EXPECT_NO_THROW(t.vm->validate(false));
  t.free(b);
}

// On a device with room for 8 pages: A and B (4 pages each), A freed and its work
// complete, then a 12 MiB request that steals A's 4 pages and needs 2 new ones, which
// the device cannot make. Returns B.
pools::block* steal_past_the_device(arena_test& t, arena::request& r) {
  pools::block* a = t.place(8 * MiB);
  pools::block* b = t.place(8 * MiB);
  t.free(a);
  t.complete_all();
  EXPECT_TRUE(t.vm->take(12 * MiB, 0, t.room(), r));
  EXPECT_EQ(r.creates, 2u);
  return b;
}

// A failed mapping: the pages it created go to the caller to release (here the
// device had room for none), and those it stole go back where they were (still
// mapped there): the arena is as it was.
TEST(arena_unit, a_failed_mapping_hands_back_its_pages) {
  arena_test t(0.0, 16 * MiB);  // room for 8 physical pages
  arena::request r;
  pools::block* b = steal_past_the_device(t, r);
  const bool mapped = t.vm->map(r);  // the device has no room for the 2 new pages
  EXPECT_FALSE(mapped);
  std::vector<page_plan> to_release;
  const arena::page_counts c = t.vm->finish(r, mapped, to_release);
  EXPECT_EQ(c.mapped, 0u);
  EXPECT_EQ(c.unmapped, 0u);
  EXPECT_EQ(c.moved, 0u);
  EXPECT_EQ(c.released, 0u) << "the device created none";
  EXPECT_TRUE(to_release.empty());
  t.vm->give_back(to_release);
  t.count(c);
  EXPECT_EQ(t.reserved, 16 * MiB);
  EXPECT_EQ(recounted(*t.vm), t.reserved);
  EXPECT_EQ(t.vm->calculate_releasable(), 8 * MiB) << "A's idle pages, back in place";
  EXPECT_NO_THROW(t.vm->validate(false));
  t.free(b);
}

// A block placed over pages another request stole waits while they are busy; when
// that request's mapping fails, the pages go back where they were, mapped, and the
// waiting block finds them so: it uses them, and they are not idle.
TEST(arena_unit, stolen_pages_a_failed_mapping_gives_back_serve_the_block_waiting_on_them) {
  arena_test t(0.0, 16 * MiB);  // room for 8 physical pages
  arena::request stealing;
  pools::block* b = steal_past_the_device(t, stealing);
  arena::request waiting;
  ASSERT_TRUE(t.vm->take(8 * MiB, 0, t.room(), waiting));  // A's place, its pages busy
  ASSERT_EQ(waiting.b->offset, 0u);
  EXPECT_TRUE(waiting.must_wait);
  EXPECT_TRUE(waiting.pages.empty());
  std::vector<page_plan> to_release;
  EXPECT_FALSE(t.vm->map(stealing));  // no room for the 2 new pages
  t.count(t.vm->finish(stealing, false, to_release));
  EXPECT_NO_THROW(t.vm->validate(true));
  EXPECT_TRUE(t.vm->map(waiting));
  t.count(t.vm->finish(waiting, true, to_release));
  EXPECT_TRUE(to_release.empty());
  EXPECT_TRUE(t.vm->is_settled(waiting.b) && t.vm->is_mapped(waiting.b));
  EXPECT_EQ(t.vm->calculate_releasable(), 0u) << "its pages are in use, not idle";
  EXPECT_EQ(recounted(*t.vm), 16 * MiB);
  EXPECT_NO_THROW(t.vm->validate(false));
  t.active += waiting.b->size;
  t.free(waiting.b);
  t.free(b);
  EXPECT_NO_THROW(t.vm->validate(false));
}

// Validation and the recount agree with the counts the arena returned, through a
// run of places, frees, completions and releases.
TEST(arena_unit, validation_passes_through_a_random_run) {
  for (const double slack : {0.0, 0.02}) {
    arena_test t(slack, std::size_t{4} << 30);
    std::mt19937 rng(7);
    std::vector<pools::block*> live;
    for (int step = 0; step < 2000; ++step) {
      const auto op = rng() % 10;
      if (live.empty() || (op < 5 && t.active < 256 * MiB)) {
        pools::block* b = t.place((1 + rng() % 24) * MiB + (rng() % 4) * 512);
        ASSERT_NE(b, nullptr) << "step " << step;
        live.push_back(b);
      } else if (op < 9 || t.active >= 256 * MiB) {
        const std::size_t i = rng() % live.size();
        t.free(live[i]);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      } else if (rng() % 2) {
        t.complete_all();
      } else {
        std::vector<page_plan> released;
        t.count(t.vm->release_idle(t.vm->calculate_releasable() / 2, released));
        t.vm->give_back(released);
        t.vm->settle_released(released);
      }
      ASSERT_NO_THROW(t.vm->validate(false)) << "step " << step;
      std::size_t live_bytes = 0, live_blocks = 0, requested = 0;
      ASSERT_EQ(t.vm->recount(&live_bytes, &live_blocks, &requested), t.reserved);
      ASSERT_EQ(live_blocks, live.size());
      ASSERT_EQ(live_bytes, t.active);
    }
    EXPECT_GT(t.unmaps, 0u) << "pages moved";
    for (pools::block* b : live) t.free(b);
    EXPECT_NO_THROW(t.vm->validate(false));
  }
}

}  // namespace
}  // namespace memkit

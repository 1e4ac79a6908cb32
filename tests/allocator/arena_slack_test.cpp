// The arena's pages: slack, and when an idle page may move. Reserved may grow this far over the
// peak in use before the arena moves idle pages (a map each) to where a request lands.
#include <gtest/gtest.h>

#include "memkit/memkit.hpp"

namespace memkit {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

sim_options one_gib() {
  sim_options o;
  o.capacity = std::size_t{1} << 30;
  return o;
}

// The arena with its invariants checked after every call; no thread cache, so that
// every free reaches it.
allocator_options arena_options(double slack = allocator_options{}.arena_slack) {
  return {
      .policy = pool_policy::arena, .validate = true, .thread_cache = false, .arena_slack = slack};
}

struct slack_run {
  std::uint64_t moves = 0;
  std::size_t reserved = 0;
  std::size_t peak_active = 0;
};

// A and B (8 MiB) side by side; A freed leaves a hole of mapped, idle pages that
// the request C does not fit in, so C lands on fresh addresses.
slack_run run_with_slack(double slack, std::size_t a_bytes = 8 * MiB,
                         std::size_t c_bytes = 12 * MiB) {
  sim_backend device(one_gib());
  allocator alloc(device, arena_options(slack));
  const allocation a = alloc.allocate(a_bytes, 0);
  const allocation b = alloc.allocate(8 * MiB, 0);
  alloc.free(a.address);
  const allocation c = alloc.allocate(c_bytes, 0);
  const statistics s = alloc.get_statistics();
  slack_run r{s.moves, s.reserved_bytes, s.peak_active_bytes};
  alloc.free(b.address);
  alloc.free(c.address);
  return r;
}

TEST(arena_slack, none_moves_idle_pages_to_keep_reserved_at_the_peak) {
  const slack_run r = run_with_slack(0.0);
  EXPECT_GT(r.moves, 0u) << "the idle pages of A were moved under C";
  EXPECT_LE(r.reserved, 20 * MiB);
}

TEST(arena_slack, grows_within_the_slack_instead_of_moving_pages) {
  const slack_run r = run_with_slack(1.0);
  EXPECT_EQ(r.moves, 0u);
  EXPECT_GT(r.reserved, 20 * MiB);
  EXPECT_LE(r.reserved, 2 * r.peak_active);
}

TEST(arena_slack, grows_what_the_slack_allows_and_moves_only_the_rest) {
  // A 16 MiB hole (8 idle pages) and a 24 MiB peak: 30% (aimed a fortieth inside,
  // 29.25%: 7.02 MiB) is room for 3 new pages of C's 10; the other 7 are moved, and
  // one idle page stays where it was.
  const slack_run r = run_with_slack(0.3, 16 * MiB, 20 * MiB);
  EXPECT_EQ(r.moves, 7u);
  EXPECT_EQ(r.reserved, 30 * MiB);
}

// Unmapping takes effect at once on the device, not in queue order: an idle page
// whose last user's work has not completed must not move, even for a request on
// that same queue (a kernel still reading it would fault). Past the slack the
// arena waits for that work rather than hold more memory.
TEST(arena_pages, an_idle_page_moves_only_once_the_work_that_used_it_completed) {
  sim_backend device(one_gib());
  allocator alloc(device, arena_options());
  const allocation a = alloc.allocate(8 * MiB, 0);
  const allocation b = alloc.allocate(8 * MiB, 0);
  const std::uint64_t reading_a = device.submit(0);
  alloc.free(a.address);
  const allocation c = alloc.allocate(12 * MiB, 0);
  EXPECT_GT(alloc.get_statistics().moves, 0u);
  EXPECT_GE(device.get_completed(0), reading_a)
      << "a's pages moved while work still used them (their old place may be unmapped)";
  EXPECT_EQ(device.get_completed(0), reading_a) << "it waited for the work";
  EXPECT_EQ(alloc.get_statistics().reserved_bytes, 20 * MiB) << "rather than grow past the peak";
  alloc.free(b.address);
  alloc.free(c.address);
}

TEST(arena_pages, with_room_in_the_slack_it_grows_instead_of_waiting) {
  sim_backend device(one_gib());
  allocator alloc(device, arena_options(1.0));
  const allocation a = alloc.allocate(8 * MiB, 0);
  const allocation b = alloc.allocate(8 * MiB, 0);
  const std::uint64_t reading_a = device.submit(0);
  alloc.free(a.address);
  const allocation c = alloc.allocate(12 * MiB, 0);
  EXPECT_LT(device.get_completed(0), reading_a) << "no wait: the slack had room";
  EXPECT_EQ(alloc.get_statistics().moves, 0u);
  EXPECT_EQ(device.get_counters().unmaps, 0u);
  alloc.free(b.address);
  alloc.free(c.address);
}

// A page that moves stays mapped where it was, as that place's shadow: the move is
// one map, no unmap, and a block placed there later takes it back with no call at
// all while it is idle where it went.
TEST(arena_pages, a_moved_page_goes_back_to_its_shadow_with_no_call) {
  sim_backend device(one_gib());
  allocator alloc(device, arena_options(0.0));
  const allocation a = alloc.allocate(8 * MiB, 0);
  const allocation b = alloc.allocate(8 * MiB, 0);
  alloc.free(a.address);
  const allocation c = alloc.allocate(12 * MiB, 0);  // A's 4 pages move under C, 2 are new
  EXPECT_NE(c.address, a.address);
  statistics s = alloc.get_statistics();
  EXPECT_EQ(s.moves, 4u);
  EXPECT_EQ(s.unmaps, 0u);
  EXPECT_EQ(device.get_counters().unmaps, 0u) << "A's place still maps them";
  EXPECT_EQ(s.reserved_bytes, 20 * MiB);
  alloc.free(c.address);
  const std::uint64_t maps = device.get_counters().maps;
  const allocation a2 = alloc.allocate(8 * MiB, 0);  // A's place again, C's pages idle
  EXPECT_EQ(a2.address, a.address);
  s = alloc.get_statistics();
  EXPECT_EQ(s.returns, 4u);
  EXPECT_EQ(s.moves, 4u);
  EXPECT_EQ(device.get_counters().maps, maps) << "no page mapped for A's return";
  EXPECT_EQ(device.get_counters().unmaps, 0u);
  EXPECT_EQ(s.reserved_bytes, 20 * MiB);
  alloc.free(a2.address);
  alloc.free(b.address);
  // Giving the pages back unmaps every place that maps them, shadows too.
  alloc.clear_cache();
  EXPECT_EQ(alloc.get_statistics().reserved_bytes, 0u);
  EXPECT_EQ(device.get_counters().mapped_bytes, 0u);
}

}  // namespace
}  // namespace memkit

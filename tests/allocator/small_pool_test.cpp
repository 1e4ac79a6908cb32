// Which pool a request goes to. Beside an arena the small pool keeps requests up to
// 512 KiB: a 2 MiB segment holds only one 1 MiB block beside anything else, so one
// left live strands the rest; the arena packs them and shares pages.
#include <gtest/gtest.h>

#include <vector>

#include "memkit/memkit.hpp"

namespace memkit {
namespace {

constexpr std::size_t KiB = std::size_t{1} << 10;
constexpr std::size_t MiB = std::size_t{1} << 20;

struct interleaved_run {
  statistics stats;
  std::size_t small_segment_bytes = 0;  // in segments of the small pool
};

// 100 blocks of 1 MiB, each followed by a 1 KiB one, all live at once.
interleaved_run run_interleaved(pool_policy policy) {
  sim_options o;
  o.capacity = std::size_t{1} << 30;
  sim_backend device(o);
  allocator alloc(device, {.policy = policy, .validate = true});
  std::vector<allocation> live;
  for (int k = 0; k < 100; ++k) {
    live.push_back(alloc.allocate(1 * MiB));
    live.push_back(alloc.allocate(1 * KiB));
  }
  interleaved_run r{alloc.get_statistics(), 0};
  for (const segment_view& v : alloc.calculate_segments()) {
    if (v.small) r.small_segment_bytes += v.size;
  }
  for (const allocation& a : live) alloc.free(a.address);
  return r;
}

TEST(small_pool, beside_an_arena_megabyte_blocks_share_pages_in_the_arena) {
  const interleaved_run r = run_interleaved(pool_policy::arena);
  EXPECT_EQ(r.small_segment_bytes, 2 * MiB) << "only the 1 KiB blocks, in one segment";
  EXPECT_LE(static_cast<double>(r.stats.reserved_bytes),
            1.04 * static_cast<double>(r.stats.active_bytes));
}

TEST(small_pool, with_segments_megabyte_blocks_stay_in_the_small_pool) {
  const interleaved_run r = run_interleaved(pool_policy::segments);
  EXPECT_GE(r.small_segment_bytes, 100 * MiB) << "every 1 MiB block in a small segment";
}

// Idle arena pages count against the slack when the small pool grows: a program
// that moves from large blocks to small ones does not hold both.
TEST(small_pool, beside_an_arena_it_grows_within_the_slack_releasing_idle_pages) {
  sim_options o;
  o.capacity = std::size_t{1} << 30;
  sim_backend device(o);
  allocator alloc(device, {.policy = pool_policy::arena, .validate = true});
  alloc.free(alloc.allocate(100 * MiB).address);  // 50 idle pages
  std::vector<allocation> small;
  for (int k = 0; k < 80; ++k) small.push_back(alloc.allocate(256 * KiB));  // 20 MiB
  const statistics s = alloc.get_statistics();
  EXPECT_LE(static_cast<double>(s.reserved_bytes),
            1.02 * static_cast<double>(s.peak_active_bytes) + 2 * MiB);
  EXPECT_GT(device.get_counters().unmaps, 0u) << "idle pages went back";
  for (const allocation& a : small) alloc.free(a.address);
}

// As the arena past the slack: idle pages whose work has not completed cannot go
// back, so the small pool waits for that work once rather than grow past the slack.
TEST(small_pool, beside_an_arena_it_waits_for_idle_pages_rather_than_grow_past_the_slack) {
  sim_options o;
  o.capacity = std::size_t{1} << 30;
  sim_backend device(o);
  allocator alloc(device, {.policy = pool_policy::arena, .validate = true, .thread_cache = false});
  const allocation large = alloc.allocate(100 * MiB, 0);  // 50 pages
  const std::uint64_t reading = device.submit(0);
  alloc.free(large.address);  // idle, in use by the device until `reading` completes
  std::vector<allocation> small;
  for (int k = 0; k < 80; ++k) small.push_back(alloc.allocate(256 * KiB, 0));  // 20 MiB
  EXPECT_EQ(device.get_completed(0), reading) << "it waited for the work";
  const statistics s = alloc.get_statistics();
  EXPECT_LE(static_cast<double>(s.reserved_bytes),
            1.02 * static_cast<double>(s.peak_active_bytes) + 2 * MiB);
  for (const allocation& a : small) alloc.free(a.address);
}

// The other way: a program that moves from small blocks to large ones. The small
// pool's empty segments are cache, given back before the arena grows past the slack
// (or moves idle pages) for the large blocks. `count` blocks of `bytes` fill
// `segment_bytes` of small segments, then are freed; with the thread caches on, the
// thread's cache keeps some of them, holding their segments: past the slack they go
// back first, so that those segments can go back too.
void expect_small_segments_go_back_before_the_arena_grows(bool thread_cache, int count,
                                                          std::size_t bytes,
                                                          std::size_t segment_bytes) {
  sim_options o;
  o.capacity = std::size_t{1} << 30;
  sim_backend device(o);
  allocator alloc(device,
                  {.policy = pool_policy::arena, .validate = true, .thread_cache = thread_cache});
  std::vector<allocation> blocks;
  for (int k = 0; k < count; ++k) blocks.push_back(alloc.allocate(bytes));
  for (const allocation& a : blocks) alloc.free(a.address);
  blocks.clear();
  const statistics before = alloc.get_statistics();
  ASSERT_EQ(before.reserved_bytes, segment_bytes);
  for (int k = 0; k < 20; ++k) blocks.push_back(alloc.allocate(2 * MiB));  // 40 MiB
  const statistics s = alloc.get_statistics();
  EXPECT_EQ(s.reserved_bytes, 40 * MiB) << "every small segment went back for the arena's pages";
  EXPECT_EQ(device.get_counters().unmaps, 0u) << "no page moved";
  for (const allocation& a : blocks) alloc.free(a.address);
}

TEST(small_pool, beside_an_arena_its_empty_segments_go_back_before_the_arena_grows) {
  expect_small_segments_go_back_before_the_arena_grows(false, 80, 256 * KiB, 20 * MiB);
}

TEST(small_pool, beside_an_arena_parked_blocks_go_back_before_the_arena_grows) {
  expect_small_segments_go_back_before_the_arena_grows(true, 80, 64 * KiB, 6 * MiB);
}

// Empty small segments whose last use is still on the device cannot go back yet: a
// request that would grow the arena past the slack waits for that work once (its own
// queue's), gives them back, and maps no more than the slack allows.
TEST(small_pool, beside_an_arena_the_arena_waits_for_empty_segments_rather_than_grow) {
  sim_options o;
  o.capacity = std::size_t{1} << 30;
  sim_backend device(o);
  allocator alloc(device, {.policy = pool_policy::arena, .validate = true, .thread_cache = false});
  std::vector<allocation> blocks;
  for (int k = 0; k < 80; ++k) blocks.push_back(alloc.allocate(256 * KiB, 0));  // 20 MiB
  const std::uint64_t reading = device.submit(0);
  for (const allocation& a : blocks) alloc.free(a.address);  // in use until `reading`
  blocks.clear();
  ASSERT_EQ(alloc.get_statistics().reserved_bytes, 20 * MiB);
  for (int k = 0; k < 20; ++k) blocks.push_back(alloc.allocate(2 * MiB, 0));  // 40 MiB
  EXPECT_EQ(device.get_completed(0), reading) << "it waited for the work";
  EXPECT_EQ(alloc.get_statistics().reserved_bytes, 40 * MiB)
      << "every small segment went back for the arena's pages";
  for (const allocation& a : blocks) alloc.free(a.address);
}

// And before the small pool itself grows past the slack: a request of another size
// than the parked blocks' takes their room rather than a new segment.
TEST(small_pool, beside_an_arena_parked_blocks_go_back_before_it_grows_past_the_slack) {
  sim_options o;
  o.capacity = std::size_t{1} << 30;
  sim_backend device(o);
  allocator alloc(device, {.policy = pool_policy::arena, .validate = true});
  std::vector<allocation> blocks;
  for (int k = 0; k < 8; ++k) blocks.push_back(alloc.allocate(256 * KiB));  // one segment
  for (const allocation& a : blocks) alloc.free(a.address);                 // parked, all of them
  blocks.clear();
  for (int k = 0; k < 4; ++k) blocks.push_back(alloc.allocate(512 * KiB));  // as many bytes
  EXPECT_EQ(alloc.get_statistics().reserved_bytes, 2 * MiB) << "no new segment";
  for (const allocation& a : blocks) alloc.free(a.address);
}

}  // namespace
}  // namespace memkit

// The arena when fences complete late: one queue's free ranges merge whatever their
// fence state, so the layout does not depend on fence timing; a wait for idle pages
// waits only for the frees it needs; a second queue still finds fresh memory.
#include <gtest/gtest.h>

#include <vector>

#include "allocator/fences.hpp"
#include "memkit/memkit.hpp"

namespace memkit {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

sim_options two_queues() {
  sim_options o;
  o.capacity = std::size_t{1} << 30;
  o.queue_count = 2;
  return o;
}

allocator_options arena_options(double slack) {
  return {
      .policy = pool_policy::arena, .validate = true, .thread_cache = false, .arena_slack = slack};
}

// A freed and known complete, then B beside it freed with its work still queued:
// one range of both, so a request of both sizes reuses their mapped pages.
TEST(arena_fences, one_queue_joins_a_pending_range_to_its_safe_neighbour) {
  sim_backend device(two_queues());
  allocator alloc(device, arena_options(4.0));
  const allocation a = alloc.allocate(8 * MiB, 0);
  const allocation b = alloc.allocate(8 * MiB, 0);
  const std::uint64_t first = device.submit(0);
  alloc.free(a.address);
  device.complete(0, first);
  const allocation c = alloc.allocate(32 * MiB, 0);  // new pages: the allocator polls fences
  device.submit(0);                                  // B's work, not complete
  alloc.free(b.address);
  const std::uint64_t maps = alloc.get_statistics().maps;
  const allocation d = alloc.allocate(16 * MiB, 0);
  EXPECT_EQ(d.address, a.address) << "A and B stood apart by fence state";
  EXPECT_EQ(alloc.get_statistics().maps, maps) << "their pages were mapped already";
  EXPECT_EQ(device.get_counters().unfinished_waits, 0u);
  alloc.free(c.address);
  alloc.free(d.address);
}

// With a second queue, memory pending on the first stays apart from fresh memory.
TEST(arena_fences, a_second_queue_finds_fresh_memory_without_waiting) {
  sim_backend device(two_queues());
  allocator_options options = arena_options(0.02);
  options.order_queues = false;  // with ordering it reuses a's range (queue_test.cpp)
  allocator alloc(device, options);
  const allocation a = alloc.allocate(8 * MiB, 0);
  device.submit(0);
  alloc.free(a.address);
  const allocation b = alloc.allocate(8 * MiB, 1);
  EXPECT_NE(b.address, a.address);
  EXPECT_EQ(device.get_counters().unfinished_waits, 0u);
  const allocation c = alloc.allocate(8 * MiB, 0);
  EXPECT_EQ(c.address, a.address) << "queue 0 reuses its own range at once";
  alloc.free(b.address);
  alloc.free(c.address);
}

// Past the slack, idle pages freed on this queue move once their work completes.
// The allocator waits for the fence after that free, not the newest one: the work
// queued after it keeps the device busy.
TEST(arena_fences, a_wait_for_idle_pages_waits_only_for_the_frees_it_needs) {
  sim_backend device(two_queues());
  allocator alloc(device, arena_options(0.0));
  const allocation x = alloc.allocate(8 * MiB, 0);
  const allocation a = alloc.allocate(8 * MiB, 0);
  const allocation y = alloc.allocate(8 * MiB, 0);
  const std::uint64_t a_work = device.submit(0);
  alloc.free(a.address);
  device.submit(0);
  const std::uint64_t later_work = device.submit(0);
  const allocation b = alloc.allocate(16 * MiB, 0);  // not in A's hole: A's 4 pages move
  EXPECT_EQ(device.get_counters().unfinished_waits, 1u);
  EXPECT_EQ(device.get_completed(0), a_work) << "waited for A's work only";
  EXPECT_LT(device.get_completed(0), later_work);
  EXPECT_EQ(alloc.get_statistics().moves, 4u);
  EXPECT_EQ(alloc.get_statistics().unmaps, 0u) << "A's place keeps them mapped, as shadows";
  EXPECT_EQ(alloc.get_statistics().reserved_bytes, 32 * MiB) << "A's pages moved, 4 more made";
  for (const allocation& live : {x, y, b}) alloc.free(live.address);
}

// Frees that idle pages record a fence only where none is outstanding or the newest
// is kFreesPerFence frees old: an event a free was host time on every step.
TEST(arena_fences, frees_that_idle_pages_record_few_fences) {
  sim_backend device(two_queues());
  allocator alloc(device, arena_options(4.0));
  constexpr std::size_t kBlocks = 256;
  std::vector<allocation> blocks;
  for (std::size_t i = 0; i < kBlocks; ++i) blocks.push_back(alloc.allocate(2 * MiB, 0));
  const std::uint64_t before = device.get_counters().fences_recorded;
  for (const allocation& a : blocks) {
    device.submit(0);  // each block's work, still queued
    alloc.free(a.address);
  }
  const std::uint64_t recorded = device.get_counters().fences_recorded - before;
  EXPECT_GE(recorded, 1u) << "the first free that idled a page records one";
  EXPECT_LE(recorded, kBlocks / fence_tracker::kFreesPerFence + 1) << "one every 64 frees";
}

}  // namespace
}  // namespace memkit

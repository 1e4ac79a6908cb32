// Queue-ordered reuse and waiting under pressure, on the simulated device.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <utility>

#include "memkit/adaptors/fault_injection.hpp"
#include "memkit/memkit.hpp"

namespace memkit {
namespace {

class queue_reuse : public ::testing::TestWithParam<pool_policy> {
 protected:
  bool segments() const { return GetParam() == pool_policy::segments; }
};

sim_options small_device() {
  sim_options o;
  o.capacity = std::size_t{64} << 20;
  o.queue_count = 2;
  return o;
}

TEST_P(queue_reuse, same_queue_reuses_at_once) {
  sim_backend device(small_device());
  allocator alloc(device, {.policy = GetParam(), .validate = true});
  const allocation a = alloc.allocate(8 << 20, 0);
  device.submit(0);  // queued work uses a
  alloc.free(a.address);
  const allocation b = alloc.allocate(8 << 20, 0);
  EXPECT_EQ(b.address, a.address);
  alloc.free(b.address);
}

// A block freed on queue 0 behind work not yet run: queue 1 gets other memory,
// then, once the work completes, that block.
void expect_the_block_to_wait_for_its_fence(sim_backend& device, allocator& alloc, bool segments) {
  const allocation a = alloc.allocate(8 << 20, 0);
  const std::uint64_t work = device.submit(0);
  alloc.free(a.address);
  const allocation b = alloc.allocate(8 << 20, 1);
  EXPECT_NE(b.address, a.address);
  if (segments) {
    EXPECT_EQ(alloc.get_statistics().backend_allocations, 2u);
  }
  EXPECT_EQ(alloc.get_statistics().queue_orders, 0u);
  device.complete(0, work);
  const allocation c = alloc.allocate(8 << 20, 1);
  EXPECT_EQ(c.address, a.address) << "once the fence completes the block serves queue 1";
  alloc.free(b.address);
  alloc.free(c.address);
}

// Without ordering between queues, another queue gets the block only once the
// fence after its free completes.
TEST_P(queue_reuse, block_behind_unfinished_fence_is_not_handed_to_another_queue) {
  sim_backend device(small_device());
  allocator alloc(device, {.policy = GetParam(), .validate = true, .order_queues = false});
  expect_the_block_to_wait_for_its_fence(device, alloc, segments());
}

TEST_P(queue_reuse, record_use_holds_the_block_for_the_other_queue_too) {
  sim_backend device(small_device());
  allocator alloc(device, {.policy = GetParam(), .validate = true});
  const allocation a = alloc.allocate(8 << 20, 0);
  alloc.record_use(a.address, 1);
  const std::uint64_t work = device.submit(1);
  alloc.free(a.address);
  const allocation b = alloc.allocate(8 << 20, 0);
  EXPECT_NE(b.address, a.address) << "queue 1 may still read it";
  device.complete(1, work);
  const allocation c = alloc.allocate(8 << 20, 0);
  EXPECT_EQ(c.address, a.address);
  alloc.free(b.address);
  alloc.free(c.address);
}

// With ordering, another queue reuses it at once: its later work waits for the
// fence on the device, and the host waits for nothing.
TEST_P(queue_reuse, another_queue_reuses_a_pending_block_once_ordered_after_it) {
  sim_backend device(small_device());
  allocator alloc(device, {.policy = GetParam(), .validate = true});
  const allocation a = alloc.allocate(8 << 20, 0);
  const std::uint64_t work = device.submit(0);
  alloc.free(a.address);
  const statistics before = alloc.get_statistics();
  const allocation b = alloc.allocate(8 << 20, 1);
  EXPECT_EQ(b.address, a.address);
  const statistics after = alloc.get_statistics();
  EXPECT_EQ(after.queue_orders, before.queue_orders + 1);
  EXPECT_EQ(after.backend_allocations, before.backend_allocations) << "no new memory";
  EXPECT_EQ(after.retries, before.retries);
  EXPECT_EQ(device.get_counters().orders, 1u);
  EXPECT_EQ(device.get_counters().unfinished_waits, 0u);
  // Queue 1's work from here on runs after queue 0's.
  const std::uint64_t later = device.submit(1);
  device.complete(1, later);
  EXPECT_LT(device.get_completed(1), later);
  device.complete(0, work);
  device.complete(1, later);
  EXPECT_EQ(device.get_completed(1), later);
  alloc.free(b.address);
}

// A backend that cannot order the queue now (a CUDA stream being captured) leaves
// the block to its queue until its fence completes, as without ordering.
TEST_P(queue_reuse, a_refused_ordering_leaves_the_block_behind_its_fence) {
  sim_backend device(small_device());
  fault_injection_options refuse_all;
  refuse_all.orderings.every = 1;
  fault_injection_adaptor faults(device, refuse_all);
  allocator alloc(faults, {.policy = GetParam(), .validate = true});
  expect_the_block_to_wait_for_its_fence(device, alloc, segments());
  EXPECT_GE(faults.get_counters().order_refusals, 1u);
}

// Without ordering, pressure waits for the other queue's work instead.
TEST_P(queue_reuse, pressure_waits_for_queued_work_then_retries) {
  sim_backend device(small_device());
  allocator alloc(device, {.policy = GetParam(), .validate = true, .order_queues = false});
  const allocation a = alloc.allocate(40 << 20, 0);
  device.submit(0);
  alloc.free(a.address);
  // Only a's memory can serve this, and only after queue 0's work: the sim
  // completes the fence when waited on.
  const allocation b = alloc.allocate(40 << 20, 1);
  EXPECT_EQ(b.address, a.address);
  EXPECT_EQ(alloc.get_statistics().retries, 1u);
  EXPECT_EQ(device.get_counters().waits, 1u);
  alloc.free(b.address);
}

// A block of bytes0 on queue 0 and one of bytes1 on queue 1, each freed behind work
// submitted on its queue; returns that work's fences (queue 0's, queue 1's).
std::pair<std::uint64_t, std::uint64_t> free_behind_work(sim_backend& device, allocator& alloc,
                                                         std::size_t bytes0, std::size_t bytes1) {
  const allocation a = alloc.allocate(bytes0, 0);
  const allocation b = alloc.allocate(bytes1, 1);
  const std::uint64_t work0 = device.submit(0);
  const std::uint64_t work1 = device.submit(1);
  alloc.free(a.address);
  alloc.free(b.address);
  return {work0, work1};
}

TEST_P(queue_reuse, two_queues_waiting_on_each_other_under_pressure_do_not_deadlock) {
  sim_options o = small_device();
  o.wait_blocks = true;  // a wait returns only when another thread completes the work
  sim_backend device(o);
  allocator alloc(device, {.policy = GetParam(), .validate = true});
  const auto [work0, work1] = free_behind_work(device, alloc, 30 << 20, 30 << 20);
  // Each thread needs the block the other queue's work still holds.
  std::atomic<int> started{0};
  auto on = [&](queue_id q) {
    return std::async(std::launch::async, [&, q] {
      started++;
      const allocation got = alloc.allocate(30 << 20, q);
      alloc.free(got.address);  // needs the allocator while the other thread may wait
      return got.address;
    });
  };
  auto t0 = on(0);
  auto t1 = on(1);
  while (started < 2) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // The allocator must still answer while both wait.
  EXPECT_EQ(alloc.get_statistics().live_blocks, 0u);
  device.complete(1, work1);
  device.complete(0, work0);
  ASSERT_EQ(t0.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  ASSERT_EQ(t1.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  EXPECT_NE(t0.get(), 0u);
  EXPECT_NE(t1.get(), 0u);
}

// clear_cache gives back blocks freed behind work the device has not run yet, as
// torch.cuda.empty_cache does: it waits for that work first (on both queues).
TEST_P(queue_reuse, clear_cache_waits_for_the_work_of_freed_blocks) {
  sim_backend device(small_device());
  allocator alloc(device, {.policy = GetParam(), .validate = true});
  const allocation kept = alloc.allocate(3 << 20, 1);
  const auto [work0, work1] = free_behind_work(device, alloc, 8 << 20, 100 << 10);
  ASSERT_LT(device.get_completed(0), work0);
  alloc.clear_cache();
  EXPECT_GE(device.get_completed(0), work0);
  EXPECT_GE(device.get_completed(1), work1);
  const statistics s = alloc.get_statistics();
  EXPECT_EQ(s.active_bytes, kept.size);
  EXPECT_EQ(s.cached_bytes, s.reserved_bytes - s.active_bytes);
  // What stays is what the live block touches: its segment, or its pages.
  EXPECT_LE(s.reserved_bytes, std::size_t{4} << 20) << "blocks freed behind pending work stayed";
  EXPECT_EQ(alloc.calculate_statistics(), s);
  alloc.free(kept.address);
  alloc.clear_cache();
  EXPECT_EQ(alloc.get_statistics().reserved_bytes, 0u);
}

// What is safe goes back before clear_cache waits for the rest of the queued work:
// the unmaps and releases run beside the device's work, not after it.
TEST_P(queue_reuse, clear_cache_gives_back_what_is_safe_before_waiting_for_the_rest) {
  sim_options o = small_device();
  o.wait_blocks = true;  // a wait returns only once this test completes the work
  sim_backend device(o);
  // Room to grow: b's pages are new ones, not a's (which would wait for a's work).
  allocator alloc(device, {.policy = GetParam(), .validate = true, .arena_slack = 10.0});
  const allocation kept = alloc.allocate(4 << 20, 0);
  const allocation a = alloc.allocate(8 << 20, 0);
  const allocation guard = alloc.allocate(2 << 20, 0);  // a's place stays a hole
  const std::uint64_t work_a = device.submit(0);
  alloc.free(a.address);
  // b fits nowhere a was; on its way to new memory a fence is recorded for a's free.
  const allocation b = alloc.allocate(16 << 20, 0);
  const std::uint64_t work_b = device.submit(0);
  alloc.free(b.address);
  device.complete(0, work_a);
  const std::size_t before = alloc.get_statistics().reserved_bytes;
  auto cleared = std::async(std::launch::async, [&] { alloc.clear_cache(); });
  const std::size_t without_a = before - (std::size_t{8} << 20);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (alloc.get_statistics().reserved_bytes > without_a &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_LE(alloc.get_statistics().reserved_bytes, without_a) << "a's memory waited for b's work";
  EXPECT_EQ(cleared.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout)
      << "clear_cache returned before b's work completed";
  device.complete(0, work_b);
  ASSERT_EQ(cleared.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  EXPECT_LE(alloc.get_statistics().reserved_bytes, std::size_t{6} << 20);
  alloc.free(guard.address);
  alloc.free(kept.address);
}

TEST_P(queue_reuse, out_of_memory_when_waiting_cannot_help) {
  sim_backend device(small_device());
  allocator alloc(device, {.policy = GetParam(), .validate = true});
  const allocation a = alloc.allocate(40 << 20, 0);
  EXPECT_THROW(alloc.allocate(40 << 20, 1), out_of_memory);
  EXPECT_EQ(alloc.get_statistics().retries, 0u);
  alloc.free(a.address);
}

TEST_P(queue_reuse, backend_full_releases_cache_and_retries) {
  sim_options o = small_device();
  sim_backend device(o);
  allocator alloc(device,
                  {.policy = GetParam(), .memory_limit = std::size_t{1} << 30});  // above capacity
  const allocation a = alloc.allocate(40 << 20, 0);
  const allocation pin = alloc.allocate(2 << 20, 0);  // a's memory cannot grow in place
  alloc.free(a.address);
  const allocation b = alloc.allocate(50 << 20, 0);  // the device has room only after a goes
  EXPECT_LE(alloc.get_statistics().reserved_bytes, std::size_t{64} << 20);
  EXPECT_EQ(alloc.get_statistics().reserved_bytes, std::size_t{52} << 20);
  alloc.free(b.address);
  alloc.free(pin.address);
}

INSTANTIATE_TEST_SUITE_P(policies, queue_reuse,
                         ::testing::Values(pool_policy::segments, pool_policy::arena),
                         [](const ::testing::TestParamInfo<pool_policy>& p) {
                           return p.param == pool_policy::segments ? "segments" : "arena";
                         });

}  // namespace
}  // namespace memkit

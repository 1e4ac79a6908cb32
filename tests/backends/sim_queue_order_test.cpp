// The simulated device's queue ordering: a queue's later work completes only after
// the fence it was ordered after.
#include <gtest/gtest.h>

#include "memkit/backends/sim.hpp"
#include "memkit/errors.hpp"

namespace memkit {
namespace {

TEST(sim_queue_order, later_work_completes_only_after_the_fence_it_waits_for) {
  sim_backend device;
  const std::uint64_t first = device.submit(0);
  const std::uint64_t before = device.submit(1);
  ASSERT_TRUE(device.order_after(1, {0, first}));
  const std::uint64_t after = device.submit(1);
  device.complete(1, after);
  EXPECT_EQ(device.get_completed(1), before) << "work issued before the ordering runs";
  device.complete(0, first);
  EXPECT_EQ(device.get_completed(1), after) << "the held work runs once the fence completes";
  EXPECT_EQ(device.get_counters().orders, 1u);
}

// The wait is work on the queue, as on a CUDA stream: a fence recorded right after it,
// with no other work between, still completes only after the fence waited for. (A
// block one queue took by ordering and freed at once is then safe for a third queue
// only once the first queue's work completed.)
TEST(sim_queue_order, a_fence_recorded_after_the_wait_covers_it) {
  sim_backend device;
  const std::uint64_t first = device.submit(0);
  ASSERT_TRUE(device.order_after(1, {0, first}));
  const std::uint64_t right_after = device.get_submitted(1);
  EXPECT_GT(right_after, 0u);
  device.complete(1, right_after);
  EXPECT_LT(device.get_completed(1), right_after);
  EXPECT_FALSE(device.is_ordered_after(2, {0, first}));
  EXPECT_TRUE(device.is_ordered_after(1, {0, first}));
  device.complete(0, first);
  device.complete(1, right_after);
  EXPECT_EQ(device.get_completed(1), right_after);
}

// Ordered after a fence of a queue that was ordered after another: after both.
TEST(sim_queue_order, orderings_chain_through_queues) {
  sim_backend device;
  const std::uint64_t first = device.submit(0);
  ASSERT_TRUE(device.order_after(1, {0, first}));
  const std::uint64_t second = device.get_submitted(1);  // after the wait
  ASSERT_TRUE(device.order_after(2, {1, second}));
  EXPECT_TRUE(device.is_ordered_after(2, {0, first}));
  EXPECT_FALSE(device.is_ordered_after(3, {0, first}));
  const std::uint64_t third = device.submit(2);
  device.complete(1, second);
  device.complete(2, third);
  EXPECT_LT(device.get_completed(2), third);
  device.complete(0, first);
  EXPECT_EQ(device.get_completed(1), second);
  EXPECT_EQ(device.get_completed(2), third);
}

TEST(sim_queue_order, a_host_wait_runs_the_fence_waited_for_first) {
  sim_backend device;
  const std::uint64_t first = device.submit(0);
  ASSERT_TRUE(device.order_after(1, {0, first}));
  const std::uint64_t after = device.submit(1);
  device.wait({1, after});
  EXPECT_EQ(device.get_completed(1), after);
  EXPECT_EQ(device.get_completed(0), first);
}

TEST(sim_queue_order, a_completed_fence_or_the_same_queue_needs_no_wait) {
  sim_backend device;
  const std::uint64_t first = device.submit(0);
  device.complete(0, first);
  EXPECT_TRUE(device.order_after(1, {0, first}));
  EXPECT_TRUE(device.order_after(0, {0, device.submit(0)}));
  EXPECT_EQ(device.get_counters().orders, 0u);
}

TEST(sim_queue_order, a_fence_never_submitted_is_an_error_naming_it) {
  sim_backend device;
  try {
    device.order_after(1, {0, 5});
    FAIL() << "expected invalid_argument";
  } catch (const invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[memkit::sim_backend::order_after] fence 5 on queue 0"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(device.order_after(9, {0, 0}), invalid_argument);
}

TEST(sim_queue_order, a_device_without_ordering_says_so) {
  sim_options options;
  options.queue_ordering = false;
  sim_backend device(options);
  EXPECT_FALSE(device.get_facts().queue_ordering);
  EXPECT_FALSE(device.order_after(1, {0, device.submit(0)}));
  EXPECT_EQ(device.get_counters().orders, 0u);
}

}  // namespace
}  // namespace memkit

// The fence tracker alone: which outstanding fence a wait takes next.
#include "allocator/fences.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace memkit {
namespace {

// clear_cache waits fence by fence for the work queued when it began, and no further:
// the oldest outstanding fence up to each queue's newest of that moment, then none.
TEST(fence_tracker, the_oldest_fence_up_to_the_newest_of_a_moment) {
  fence_tracker fences(2);
  fences.note_free(0, 1);
  fences.record(0, 1, 10);
  fences.note_free(0, 2);
  fences.record(0, 2, 20);
  fences.note_free(1, 3);
  fences.record(1, 3, 5);
  const std::vector<fence> until = fences.get_newest(std::nullopt);
  ASSERT_EQ(until.size(), 2u);
  fences.note_free(0, 4);
  fences.record(0, 4, 30);  // after that moment
  std::optional<fence> next = fences.find_oldest(until);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->queue, 0u);
  EXPECT_EQ(next->value, 10u);
  // Queue 0's work completes up to 20: queue 1's fence is next.
  fence_tracker::refresh_plan plan = fences.plan_refresh(4);
  ASSERT_TRUE(plan.record.empty());
  ASSERT_EQ(plan.poll, (std::vector<queue_id>{0, 1}));
  EXPECT_TRUE(fences.apply_refresh(plan, {}, {20, 0}));
  next = fences.find_oldest(until);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->queue, 1u);
  EXPECT_EQ(next->value, 5u);
  // Then none, though queue 0's later fence is still outstanding.
  plan = fences.plan_refresh(4);
  EXPECT_TRUE(fences.apply_refresh(plan, {}, {20, 5}));
  EXPECT_FALSE(fences.find_oldest(until));
  EXPECT_EQ(fences.get_newest(0).size(), 1u);
}

}  // namespace
}  // namespace memkit

// The fence tracker alone: which outstanding fence a wait takes next.
#include "allocator/fences.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace memkit {
namespace {

// clear_cache waits fence by fence for the work queued when it began, and no further:
// a fence a quarter of the way through those outstanding up to each queue's newest of
// that moment (the oldest while few are), then none.
TEST(fence_tracker, the_next_fence_is_a_quarter_of_the_way_up_to_the_newest_of_a_moment) {
  fence_tracker fences(2);
  for (serial_t serial = 1; serial <= 9; ++serial) {  // queue 0: fences 10, 20, ..., 90
    fences.note_free(0, serial);
    fences.record(0, serial, 10 * serial);
  }
  fences.note_free(1, 10);
  fences.record(1, 10, 5);
  const std::vector<fence> until = fences.get_newest(std::nullopt);
  ASSERT_EQ(until.size(), 2u);
  fences.note_free(0, 11);
  fences.record(0, 11, 100);  // after that moment
  std::optional<fence> next = fences.find_next(until);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->queue, 0u);
  EXPECT_EQ(next->value, 30u);  // the third of nine
  auto complete = [&](std::vector<fence_value> completed) {
    const fence_tracker::refresh_plan plan = fences.plan_refresh(11);
    ASSERT_TRUE(plan.record.empty());
    ASSERT_EQ(plan.poll.size(), completed.size());
    fences.apply_refresh(plan, {}, completed);
  };
  complete({80, 0});  // two of queue 0's left: the oldest of them
  next = fences.find_next(until);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->value, 90u);
  complete({90, 0});  // queue 1's fence is next
  next = fences.find_next(until);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->queue, 1u);
  EXPECT_EQ(next->value, 5u);
  // Then none, though queue 0's later fence is still outstanding.
  complete({90, 5});
  EXPECT_FALSE(fences.find_next(until));
  EXPECT_EQ(fences.get_newest(0).size(), 1u);
}

}  // namespace
}  // namespace memkit

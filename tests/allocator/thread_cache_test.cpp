// The per-thread cache's own rules (src/allocator/thread_cache.hpp).
#include "allocator/thread_cache.hpp"

#include <gtest/gtest.h>

namespace memkit {
namespace {

// Runs one window of tries with `hits` of them served.
void run_window(thread_cache& cache, std::uint32_t hits) {
  for (std::uint32_t i = 0; i < thread_cache::kTryWindow; ++i) {
    ASSERT_TRUE(cache.is_worth_trying());
    cache.count_try(i < hits);
  }
}

TEST(thread_cache, a_cache_that_rarely_serves_is_skipped_for_a_while_then_tried_again) {
  thread_cache cache(1, 1);
  run_window(cache, thread_cache::kTryWindow / thread_cache::kMinHitShare - 1);
  EXPECT_FALSE(cache.is_trying());
  for (std::uint32_t i = 0; i < thread_cache::kSkip; ++i) EXPECT_FALSE(cache.is_worth_trying());
  EXPECT_TRUE(cache.is_worth_trying());
  EXPECT_TRUE(cache.is_trying());
}

TEST(thread_cache, a_cache_that_serves_often_enough_is_always_tried) {
  thread_cache cache(1, 1);
  for (int window = 0; window < 4; ++window) {
    run_window(cache, thread_cache::kTryWindow / thread_cache::kMinHitShare);
  }
  EXPECT_TRUE(cache.is_worth_trying());
}

// Holds back a block of 1 MiB and then asks for `taken` ? its size : another size.
bool hold_and_ask(thread_cache& cache, pools::block& b, bool taken) {
  if (!cache.is_worth_holding_back() || !cache.hold_back(&b, 0x1000)) return false;
  address_t address = 0;
  thread_cache::parked evicted;
  const std::size_t size = taken ? b.size : b.size / 2;
  return cache.take_held_back(size, b.queue, &address, &evicted) == &b;
}

TEST(thread_cache, holding_back_stops_where_hardly_any_block_is_taken_back) {
  thread_cache cache(1, 1);
  pools::block b;
  b.size = thread_cache::kMaxHeldBack;
  // One taken back in kMinHoldShare tries keeps it on ...
  for (std::uint32_t i = 0; i < 4 * thread_cache::kTryWindow; ++i) {
    const bool taken = i % thread_cache::kMinHoldShare == 0;
    ASSERT_EQ(hold_and_ask(cache, b, taken), taken);
  }
  // ... none in a window stops it for kSkip blocks handed out, then it is tried again.
  for (std::uint32_t i = 0; i < thread_cache::kTryWindow; ++i)
    ASSERT_FALSE(hold_and_ask(cache, b, false));
  for (std::uint32_t i = 0; i + 1 < thread_cache::kSkip; ++i) {
    ASSERT_FALSE(cache.is_worth_holding_back());
    ASSERT_FALSE(cache.hold_back(&b, 0x1000));  // a block remembered for the parked bins
  }
  EXPECT_FALSE(cache.is_worth_holding_back());
  EXPECT_TRUE(hold_and_ask(cache, b, true));
}

}  // namespace
}  // namespace memkit

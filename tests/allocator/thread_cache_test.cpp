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

}  // namespace
}  // namespace memkit

// Model-based random test: long random call sequences on a sim device, checked
// call by call against the reference model (tests/reliability/reference_model.hpp).
#include <gtest/gtest.h>

#include <random>
#include <tuple>

#include "reliability/reference_model.hpp"

namespace memkit::reliability {
namespace {

sim_options model_device() {
  sim_options o;
  o.capacity = std::size_t{64} << 20;
  o.queue_count = 3;
  return o;
}

using model_params = std::tuple<std::uint64_t, pool_policy, traffic>;
class model_test : public ::testing::TestWithParam<model_params> {};

TEST_P(model_test, random_calls_agree_with_the_reference_model) {
  const auto [seed, policy, sizes] = GetParam();
  sim_backend device(model_device());
  fault_injection_options refusals;
  refusals.orderings.rate = 0.25;  // some queues cannot wait: both paths are taken
  fault_injection_adaptor faults(device, refusals);
  allocator_options options;
  options.policy = policy;
  options.validate = true;
  allocator alloc(faults, options);
  api_driver driver(device, faults, alloc);
  std::mt19937_64 rng(seed);
  try {
    for (int i = 0; i < 20000; ++i) run_random_call(driver, rng, device.get_facts(), sizes);
    driver.drain();
  } catch (const std::exception& e) {
    FAIL() << "seed " << seed << ": " << e.what();
  }
  const driver_counts& c = driver.get_counts();
  EXPECT_GT(c.allocations, 1000u);
  EXPECT_GT(c.invalid_argument, 0u) << "bad calls were tried and rejected";
  EXPECT_GT(alloc.get_statistics().queue_orders, 0u);
  EXPECT_GT(faults.get_counters().order_refusals, 0u);
  RecordProperty("operations", std::to_string(c.operations));
  if (policy == pool_policy::arena) {
    EXPECT_GT(alloc.get_statistics().moves, 0u);
    // Large requests only: the arena moves pages hundreds of times, and some go back
    // to where they were still mapped (mixed traffic does so a few times, if at all).
    if (sizes == traffic::large) {
      EXPECT_GT(alloc.get_statistics().returns, 0u);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(seeds, model_test,
                         ::testing::Combine(::testing::Values(1, 2, 3),
                                            ::testing::Values(pool_policy::segments,
                                                              pool_policy::arena),
                                            ::testing::Values(traffic::mixed)));
INSTANTIATE_TEST_SUITE_P(large_requests, model_test,
                         ::testing::Combine(::testing::Values(1, 2, 3),
                                            ::testing::Values(pool_policy::arena),
                                            ::testing::Values(traffic::large)));

TEST(model_test_oom, out_of_memory_with_nothing_live_never_happens_when_the_limit_allows) {
  sim_backend device(model_device());
  fault_injection_adaptor faults(device);
  allocator alloc(faults, {.validate = true});
  api_driver driver(device, faults, alloc);
  // Fill the cache with blocks freed behind unfinished work on every queue, then
  // ask for one segment that needs all of it back.
  for (queue_id q = 0; q < 3; ++q) {
    const address_t a = driver.allocate(std::size_t{16} << 20, q);
    ASSERT_NE(a, 0u);
    driver.submit(q);
    driver.record_use(a, (q + 1) % 3);
    driver.submit((q + 1) % 3);
    driver.free(a);
  }
  EXPECT_NE(driver.allocate(std::size_t{60} << 20, 0), 0u);
  driver.drain();
}

// Found by the model test (seed 1, segments policy): after 8483 random calls,
// freeing every block, completing all work and clear_cache(), no segment may stay
// reserved with free blocks that never merged.
TEST(merging, free_neighbours_merge_once_their_fences_complete) {
  sim_backend device(model_device());
  fault_injection_adaptor faults(device);
  allocator_options options;
  options.policy = pool_policy::segments;
  options.validate = true;
  allocator alloc(faults, options);
  api_driver driver(device, faults, alloc);
  std::mt19937_64 rng(1);
  for (int i = 0; i < 8483; ++i) run_random_call(driver, rng, device.get_facts());
  EXPECT_NO_THROW(driver.drain());
}

// Peaks are exact without thread caches. With them, a freed block parked in a
// cache still counts on the shared counter the peak is kept on, so the peak is an
// upper bound until the caches are flushed (reset_peak flushes them).
TEST(peaks, exact_without_thread_caches_and_an_upper_bound_with_them) {
  for (const bool caching : {false, true}) {
    sim_backend device(model_device());
    allocator_options options;
    options.validate = true;
    options.thread_cache = caching;
    allocator alloc(device, options);
    const allocation a = alloc.allocate(4096, 0);
    alloc.free(a.address);
    const allocation b = alloc.allocate(8192, 0);
    const statistics s = alloc.get_statistics();
    if (caching) {
      EXPECT_GE(s.peak_active_bytes, 8192u);
      EXPECT_LE(s.peak_active_bytes, 8192u + 4096u);
    } else {
      EXPECT_EQ(s.peak_active_bytes, 8192u);
      EXPECT_EQ(s.peak_requested_bytes, 8192u);
    }
    alloc.reset_peak();
    EXPECT_EQ(alloc.get_statistics().peak_active_bytes, 8192u) << "reset_peak flushes the caches";
    alloc.free(b.address);
  }
}

}  // namespace
}  // namespace memkit::reliability

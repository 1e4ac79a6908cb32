// Fault injection: the adaptor's schedules, then the allocator under injected segment
// faults and late, out-of-order fences, checked after every call by the reference
// model (validate() passes, statistics equal a recount and the model, clear errors,
// no live block lost or handed out twice, nothing leaked at the end).
#include "memkit/adaptors/fault_injection.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <random>

#include "reliability/reference_model.hpp"

namespace memkit::reliability {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

sim_options fault_device() {
  sim_options o;
  o.capacity = 64 * MiB;
  o.queue_count = 3;
  return o;
}

// Schedules and options, built field by field (designated initializers that leave
// members out trip -Wmissing-field-initializers).
fault_schedule every(std::uint64_t n) {
  fault_schedule s;
  s.every = n;
  return s;
}
fault_schedule listed(std::vector<std::uint64_t> calls) {
  fault_schedule s;
  s.calls = std::move(calls);
  return s;
}
fault_schedule at_rate(double rate, std::uint64_t seed) {
  fault_schedule s;
  s.rate = rate;
  s.seed = seed;
  return s;
}
fault_injection_options segment_faults(fault_schedule s) {
  fault_injection_options o;
  o.segments = std::move(s);
  return o;
}
fault_injection_options vm_faults(fault_schedule s) {
  fault_injection_options o;
  o.virtual_memory = std::move(s);
  return o;
}
fault_injection_options late_fences(std::uint32_t lag, bool random, std::uint64_t seed) {
  fault_injection_options o;
  o.completion_lag = lag;
  o.random_lag = random;
  o.lag_seed = seed;
  return o;
}

// --- the adaptor alone ---------------------------------------------------------

TEST(fault_injection_adaptor, every_nth_call_fails_and_is_counted) {
  sim_backend device(fault_device());
  fault_injection_adaptor faults(device, segment_faults(every(3)));
  std::vector<address_t> got;
  for (int i = 0; i < 9; ++i) got.push_back(faults.allocate_segment(2 * MiB));
  for (int i = 0; i < 9; ++i) EXPECT_EQ(got[i] == 0, (i + 1) % 3 == 0) << "call " << i + 1;
  EXPECT_EQ(faults.get_counters().segment_calls, 9u);
  EXPECT_EQ(faults.get_counters().segment_faults, 3u);
  EXPECT_EQ(device.get_counters().segment_allocs, 6u) << "failed calls never reach the device";
  for (address_t a : got)
    if (a) faults.free_segment(a, 2 * MiB);
  EXPECT_EQ(device.get_counters().reserved_bytes, 0u);
}

TEST(fault_injection_adaptor, listed_calls_fail) {
  sim_backend device(fault_device());
  fault_injection_adaptor faults(device, segment_faults(listed({2, 5})));
  for (std::uint64_t call = 1; call <= 6; ++call) {
    const address_t a = faults.allocate_segment(MiB);
    EXPECT_EQ(a == 0, call == 2 || call == 5) << "call " << call;
    if (a) faults.free_segment(a, MiB);
  }
  EXPECT_EQ(faults.get_counters().segment_faults, 2u);
}

TEST(fault_injection_adaptor, a_seeded_rate_repeats_exactly) {
  auto pattern = [](std::uint64_t seed) {
    sim_backend device(fault_device());
    fault_injection_adaptor faults(device, segment_faults(at_rate(0.5, seed)));
    std::vector<bool> failed;
    for (int i = 0; i < 64; ++i) {
      const address_t a = faults.allocate_segment(MiB);
      failed.push_back(a == 0);
      if (a) faults.free_segment(a, MiB);
    }
    return failed;
  };
  EXPECT_EQ(pattern(7), pattern(7));
  EXPECT_NE(pattern(7), pattern(8));
  const auto p = pattern(7);
  const auto n = std::count(p.begin(), p.end(), true);
  EXPECT_GT(n, 10);
  EXPECT_LT(n, 54);
}

TEST(fault_injection_adaptor, disabled_passes_every_call_through) {
  sim_backend device(fault_device());
  fault_injection_adaptor faults(device, segment_faults(every(1)));
  faults.set_enabled(false);
  const address_t a = faults.allocate_segment(MiB);
  EXPECT_NE(a, 0u);
  faults.free_segment(a, MiB);
  faults.set_enabled(true);
  EXPECT_EQ(faults.allocate_segment(MiB), 0u);
  EXPECT_EQ(faults.get_counters().segment_faults, 1u);
}

TEST(fault_injection_adaptor, virtual_memory_calls_fail_on_their_schedule) {
  sim_backend device(fault_device());
  fault_injection_adaptor faults(device, vm_faults(every(1)));
  EXPECT_EQ(faults.reserve_range(2 * MiB), 0u);
  EXPECT_EQ(faults.create_page(2 * MiB), 0u);
  try {
    faults.map(address_t{1} << 44, 1, 2 * MiB);
    FAIL() << "map did not fail";
  } catch (const injected_fault& e) {
    EXPECT_EQ(std::string(e.what()).rfind("[memkit::fault_injection_adaptor::map] injected", 0), 0u)
        << e.what();
  }
  EXPECT_THROW(faults.unmap(address_t{1} << 44, 2 * MiB), injected_fault);
  EXPECT_EQ(faults.get_counters().vm_calls, 4u);
  EXPECT_EQ(faults.get_counters().vm_faults, 4u);
  EXPECT_EQ(faults.get_counters().segment_faults, 0u);
  faults.set_vm_schedule({});
  const address_t range = faults.reserve_range(4 * MiB);
  const page_id page = faults.create_page(2 * MiB);
  ASSERT_NE(range, 0u);
  ASSERT_NE(page, 0u);
  EXPECT_NO_THROW(faults.map(range, page, 2 * MiB)) << "an empty schedule fails nothing";
  faults.unmap(range, 2 * MiB);
  faults.release_page(page, 2 * MiB);
  faults.release_range(range, 4 * MiB);
  EXPECT_EQ(faults.get_counters().vm_faults, 4u);
}

TEST(fault_injection_adaptor, completions_arrive_late_but_never_go_back) {
  sim_backend device(fault_device());
  fault_injection_adaptor faults(device, late_fences(2, false, 1));
  device.submit(0);
  device.submit(0);
  device.complete(0, 2);
  EXPECT_EQ(faults.get_completed(0), 2u) << "the first answer has no history to lag behind";
  device.submit(0);
  device.complete(0, 3);
  EXPECT_EQ(faults.get_completed(0), 2u);
  EXPECT_EQ(faults.get_completed(0), 2u);
  EXPECT_EQ(faults.get_completed(0), 3u) << "two queries later";
  EXPECT_GE(faults.get_counters().late_completions, 2u);
  // A waited fence is complete from then on.
  const std::uint64_t f = device.submit(0);
  faults.wait({0, f});
  EXPECT_EQ(faults.get_completed(0), f);
}

TEST(fault_injection_adaptor, random_lag_completes_queues_out_of_order_and_monotonically) {
  sim_backend device(fault_device());
  fault_injection_adaptor faults(device, late_fences(4, true, 3));
  std::vector<std::uint64_t> last(3, 0);
  bool out_of_order = false;
  for (int step = 1; step <= 200; ++step) {
    for (queue_id q = 0; q < 3; ++q) device.complete(q, device.submit(q));
    std::vector<std::uint64_t> now(3);
    for (queue_id q = 0; q < 3; ++q) {
      now[q] = faults.get_completed(q);
      EXPECT_GE(now[q], last[q]) << "a completion went back";
      EXPECT_LE(now[q], device.get_completed(q));
      last[q] = now[q];
    }
    // Work was submitted on every queue at the same steps: differing answers mean
    // later work on one queue is reported done before earlier work on another.
    out_of_order = out_of_order || now[0] != now[1] || now[1] != now[2];
  }
  EXPECT_TRUE(out_of_order);
}

// --- the allocator under injected faults ------------------------------------------

struct fault_run {
  std::uint64_t faults = 0;
  std::uint64_t operations = 0;
  std::uint64_t out_of_memory = 0;
};

fault_run run_with_faults(fault_injection_options options, std::uint64_t seed, int calls,
                          std::size_t cache_limit, pool_policy policy = pool_policy::segments) {
  sim_backend device(fault_device());
  fault_injection_adaptor faults(device, std::move(options));
  allocator_options ao;
  ao.cache_limit = cache_limit;
  ao.policy = policy;
  ao.validate = true;
  allocator alloc(faults, ao);
  api_driver driver(device, faults, alloc);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < calls; ++i) run_random_call(driver, rng, device.get_facts());
  // Later requests succeed when memory allows: with faults off, after the drain.
  driver.drain();
  faults.set_enabled(false);
  driver.set_memory_limit(64 * MiB);
  // All the device has left serves one request.
  const std::size_t left = 64 * MiB - alloc.get_statistics().reserved_bytes;
  const address_t a = driver.allocate(left - 4 * MiB, 0);
  if (a == 0) throw model_mismatch("[reliability] a request failed after the faults");
  driver.drain();
  return {faults.get_counters().get_faults(), driver.get_counts().operations,
          driver.get_counts().out_of_memory};
}

TEST(fault_injection, every_third_segment_allocation_fails) {
  try {
    const fault_run r = run_with_faults(segment_faults(every(3)), 11, 20000, 4 * MiB);
    EXPECT_GT(r.faults, 50u);
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
}

TEST(fault_injection, arena_page_creations_fail_at_random) {
  try {
    fault_injection_options o = vm_faults(at_rate(0.3, 21));
    o.vm_calls = vm_create_page;
    o.segments = at_rate(0.3, 22);  // the small pool's segments too
    const fault_run r = run_with_faults(o, 21, 20000, 0, pool_policy::arena);
    EXPECT_GT(r.faults, 100u);
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
}

TEST(fault_injection, listed_segment_allocations_fail) {
  try {
    const fault_run r =
        run_with_faults(segment_faults(listed({1, 2, 3, 10, 11, 20, 21, 22})), 12, 5000, 2 * MiB);
    // Only the listed calls fail; how many segment calls a run makes is the core's
    // business (caches in front of the pools make fewer).
    EXPECT_GE(r.faults, 5u);
    EXPECT_LE(r.faults, 8u);
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
}

TEST(fault_injection, late_and_out_of_order_fences_never_release_a_block_early) {
  try {
    const fault_run r = run_with_faults(late_fences(5, true, 5), 13, 20000, 0);
    EXPECT_GT(r.operations, 19000u);
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
}

allocator_options with_segments() {
  allocator_options o;
  o.policy = pool_policy::segments;
  o.validate = true;
  return o;
}

TEST(fault_injection, a_failed_growth_releases_the_cache_and_retries) {
  sim_backend device(fault_device());
  fault_injection_adaptor faults(device);
  allocator alloc(faults, with_segments());
  api_driver driver(device, faults, alloc);
  const address_t a = driver.allocate(8 * MiB, 0);
  driver.free(a);  // cached, safe on queue 0
  // The next growth fails once; the cached segment goes back and the retry succeeds.
  faults.set_segment_schedule(listed({1}));
  const address_t b = driver.allocate(16 * MiB, 0);
  EXPECT_NE(b, 0u);
  EXPECT_EQ(faults.get_counters().segment_faults, 1u);
  EXPECT_EQ(alloc.get_statistics().reserved_bytes, 16 * MiB) << "the cache was released";
  driver.drain();
}

TEST(fault_injection, a_fault_with_nothing_to_release_is_a_clear_out_of_memory) {
  sim_backend device(fault_device());
  fault_injection_adaptor faults(device);
  allocator alloc(faults, with_segments());
  api_driver driver(device, faults, alloc);
  const address_t keep = driver.allocate(4 * MiB, 1);
  faults.set_segment_schedule(every(1));
  const statistics before = alloc.get_statistics();
  try {
    alloc.allocate(8 * MiB, 0);
    FAIL() << "the request succeeded though every segment allocation fails";
  } catch (const out_of_memory& e) {
    EXPECT_EQ(std::string(e.what()).rfind("[memkit::allocate] out of memory: requested 8388608", 0),
              0u)
        << e.what();
    EXPECT_EQ(e.get_details().active_bytes, 4 * MiB);
  }
  const statistics after = alloc.get_statistics();
  EXPECT_EQ(after.active_bytes, before.active_bytes);
  EXPECT_EQ(after.live_blocks, before.live_blocks);
  EXPECT_EQ(after.out_of_memory, before.out_of_memory + 1);
  EXPECT_EQ(alloc.get_size(keep), 4 * MiB) << "the live block survived";
  EXPECT_NO_THROW(alloc.validate());
  faults.set_segment_schedule({});
  const allocation later = alloc.allocate(8 * MiB, 0);
  EXPECT_NE(later.address, 0u) << "later requests succeed when memory allows";
  alloc.free(later.address);
  alloc.free(keep);
  device.complete_all();
  alloc.clear_cache();
  EXPECT_EQ(alloc.get_statistics().reserved_bytes, 0u);
  EXPECT_EQ(device.get_counters().reserved_bytes, 0u);
}

// The release soak: at least ten thousand injected faults, every one followed by
// the full set of checks. Prints its counts for docs/RELIABILITY.md.
TEST(fault_injection, soak_of_ten_thousand_faults_loses_nothing) {
  fault_run total;
  std::uint64_t seed = 100;
  try {
    while (total.faults < 10000) {
      fault_injection_options o;
      o.segments = at_rate(0.35, seed);
      o.completion_lag = static_cast<std::uint32_t>(seed % 4);
      o.random_lag = seed % 2 == 0;
      o.lag_seed = seed;
      o.virtual_memory = at_rate(0.35, seed + 7);
      o.vm_calls = vm_create_page;
      const pool_policy policy = seed % 3 == 0 ? pool_policy::arena : pool_policy::segments;
      const fault_run r = run_with_faults(o, seed, 15000, 0, policy);
      total.faults += r.faults;
      total.operations += r.operations;
      total.out_of_memory += r.out_of_memory;
      ++seed;
    }
  } catch (const std::exception& e) {
    FAIL() << "seed " << seed << ": " << e.what();
  }
  std::printf(
      "[reliability] fault soak: %llu injected faults, %llu checked calls, %llu clear "
      "out_of_memory errors, %llu runs, 0 violations\n",
      static_cast<unsigned long long>(total.faults),
      static_cast<unsigned long long>(total.operations),
      static_cast<unsigned long long>(total.out_of_memory),
      static_cast<unsigned long long>(seed - 100));
  RecordProperty("injected_faults", std::to_string(total.faults));
  EXPECT_GE(total.faults, 10000u);
}

}  // namespace
}  // namespace memkit::reliability

namespace memkit::reliability {
namespace {

allocator_options with_arena() {
  allocator_options o;
  o.policy = pool_policy::arena;
  o.validate = true;
  return o;
}

TEST(fault_injection, a_failed_page_creation_is_a_clear_out_of_memory_and_leaks_nothing) {
  sim_backend device(fault_device());
  fault_injection_adaptor faults(device);
  allocator alloc(faults, with_arena());
  api_driver driver(device, faults, alloc);
  const address_t keep = driver.allocate(4 * MiB, 0);
  ASSERT_NE(keep, 0u);
  faults.set_vm_schedule(every(1), vm_create_page);
  EXPECT_EQ(driver.allocate(8 * MiB, 1), 0u) << "every page creation fails";
  EXPECT_GT(faults.get_counters().vm_faults, 0u);
  faults.set_vm_schedule({});
  EXPECT_NE(driver.allocate(8 * MiB, 1), 0u) << "later requests succeed when memory allows";
  driver.drain();
}

// BUG (reported): backend::map has no failure channel but a real driver's map can fail
// (cuMemMap). When it throws, arena_map leaves the request half done: its pages stay
// busy, `reserving` keeps the request's bytes and created pages are never released,
// so the next allocation touching those pages waits forever and the counters drift.
// Run with --gtest_also_run_disabled_tests to see it fail.
TEST(fault_injection, a_failed_map_leaves_the_arena_consistent) {
  sim_backend device(fault_device());
  fault_injection_adaptor faults(device);
  allocator alloc(faults, with_arena());
  faults.set_vm_schedule(listed({1}), vm_map);
  EXPECT_THROW(alloc.allocate(8 * MiB, 0), std::exception);
  EXPECT_NO_THROW(alloc.validate());
  EXPECT_EQ(alloc.get_statistics().reserved_bytes,
            device.get_counters().page_bytes + device.get_counters().reserved_bytes);
  faults.set_vm_schedule({});
  std::future<allocation> later =
      std::async(std::launch::async, [&] { return alloc.allocate(8 * MiB, 0); });
  ASSERT_EQ(later.wait_for(std::chrono::seconds(5)), std::future_status::ready)
      << "the allocation waits forever on pages left busy";
  alloc.free(later.get().address);
  device.complete_all();
  alloc.clear_cache();
  EXPECT_EQ(device.get_counters().page_bytes, 0u) << "pages created before the failure leaked";
}

}  // namespace
}  // namespace memkit::reliability

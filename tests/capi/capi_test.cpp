#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <thread>

#include "memkit/memkit.h"
#include "memkit/version.hpp"

TEST(capi, allocates_frees_and_reports) {
  memkit_backend* device = memkit_sim_backend_create(std::size_t{1} << 30, 0);
  memkit_allocator* alloc = memkit_allocator_create(device);
  std::uint64_t address = 0;
  std::size_t size = 0;
  ASSERT_EQ(memkit_allocate(alloc, 6000, 0, &address, &size), MEMKIT_OK);
  EXPECT_NE(address, 0u);
  EXPECT_GE(size, 6000u);
  memkit_statistics s;
  memkit_get_statistics(alloc, &s);
  EXPECT_EQ(s.active_bytes, size);
  EXPECT_EQ(memkit_free(alloc, address), MEMKIT_OK);
  EXPECT_EQ(memkit_free(alloc, address), MEMKIT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(memkit_last_error()).find("[memkit::free]"), std::string::npos);
  EXPECT_EQ(memkit_allocate(alloc, std::size_t{2} << 30, 0, &address, &size),
            MEMKIT_INVALID_ARGUMENT);
  memkit_set_memory_limit(alloc, 4 << 20);
  EXPECT_EQ(memkit_allocate(alloc, 8 << 20, 0, &address, &size), MEMKIT_OUT_OF_MEMORY);
  EXPECT_NE(std::string(memkit_last_error()).find("out of memory"), std::string::npos);
  EXPECT_EQ(memkit_set_memory_limit(alloc, 8 << 20), std::size_t{4} << 20);
  std::size_t previous = 1;
  EXPECT_EQ(memkit_set_wired_limit(alloc, std::size_t{4} << 30, &previous),
            MEMKIT_INVALID_ARGUMENT);
  memkit_clear_cache(alloc);
  memkit_get_statistics(alloc, &s);
  EXPECT_EQ(s.cached_bytes, 0u);
  memkit_allocator_destroy(alloc);
  memkit_backend_destroy(device);
}

// Every entry point checks its handles and output pointers: no call crashes or lets
// an exception out, and each failure names the function and the argument.
TEST(capi, null_handles_and_bad_options_are_errors_not_crashes) {
  auto last_error_names = [](const char* what) {
    return std::string(memkit_last_error()).find(what) != std::string::npos;
  };
  std::uint64_t address = 0;
  std::size_t size = 0;
  EXPECT_EQ(memkit_allocate(nullptr, 64, 0, &address, &size), MEMKIT_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_names("[memkit_allocate] allocator is NULL"));
  EXPECT_EQ(memkit_free(nullptr, 1), MEMKIT_INVALID_ARGUMENT);
  EXPECT_EQ(memkit_record_use(nullptr, 1, 0), MEMKIT_INVALID_ARGUMENT);
  EXPECT_EQ(memkit_set_memory_limit(nullptr, 1), 0u);
  EXPECT_TRUE(last_error_names("[memkit_set_memory_limit] allocator is NULL"));
  EXPECT_EQ(memkit_set_cache_limit(nullptr, 1), 0u);
  EXPECT_EQ(memkit_set_wired_limit(nullptr, 1, nullptr), MEMKIT_INVALID_ARGUMENT);
  memkit_statistics s;
  EXPECT_EQ(memkit_get_statistics(nullptr, &s), MEMKIT_INVALID_ARGUMENT);
  EXPECT_EQ(memkit_reset_peak(nullptr), MEMKIT_INVALID_ARGUMENT);
  EXPECT_EQ(memkit_clear_cache(nullptr), MEMKIT_INVALID_ARGUMENT);
  EXPECT_EQ(memkit_allocator_create(nullptr), nullptr);
  EXPECT_TRUE(last_error_names("[memkit_allocator_create] backend is NULL"));

  EXPECT_EQ(memkit_sim_backend_create(std::size_t{1} << 30, 3 << 20), nullptr);
  EXPECT_TRUE(last_error_names("granularity 3145728 is not a power of two"));

  memkit_backend* device = memkit_sim_backend_create(std::size_t{1} << 30, 0);
  ASSERT_NE(device, nullptr);
  memkit_allocator* alloc = memkit_allocator_create(device);
  ASSERT_NE(alloc, nullptr);
  EXPECT_EQ(memkit_get_statistics(alloc, nullptr), MEMKIT_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_names("[memkit_get_statistics] out is NULL"));
  EXPECT_EQ(memkit_get_statistics(alloc, &s), MEMKIT_OK);
  EXPECT_EQ(s.allocations, 0u) << "the failed calls changed nothing";
  memkit_allocator_destroy(alloc);
  memkit_backend_destroy(device);
}

TEST(capi, version_is_the_projects) { EXPECT_STREQ(memkit_version(), MEMKIT_VERSION_STRING); }

TEST(capi, a_success_clears_the_last_error) {
  EXPECT_EQ(memkit_free(nullptr, 1), MEMKIT_INVALID_ARGUMENT);
  EXPECT_STRNE(memkit_last_error(), "");
  memkit_backend* device = memkit_cpu_backend_create();
  ASSERT_NE(device, nullptr);
  EXPECT_STREQ(memkit_last_error(), "");
  memkit_backend_destroy(device);
}

// The last error belongs to the thread whose call failed.
TEST(capi, the_last_error_is_per_thread) {
  EXPECT_EQ(memkit_free(nullptr, 1), MEMKIT_INVALID_ARGUMENT);
  std::string other;
  std::thread([&] { other = memkit_last_error(); }).join();
  EXPECT_EQ(other, "");
  EXPECT_NE(std::string(memkit_last_error()).find("[memkit_free]"), std::string::npos);
}

TEST(capi, options_limits_and_snapshot) {
  memkit_backend* device = memkit_sim_backend_create(std::size_t{1} << 30, 0);
  ASSERT_NE(device, nullptr);
  memkit_allocator_options options;
  ASSERT_EQ(memkit_allocator_options_init(&options), MEMKIT_OK);
  EXPECT_EQ(options.policy, MEMKIT_POLICY_AUTOMATIC);
  EXPECT_DOUBLE_EQ(options.arena_slack, 0.02);
  EXPECT_EQ(options.thread_cache, 1);
  EXPECT_EQ(options.plan_loops, 1);
  EXPECT_EQ(options.order_queues, 1);
  options.policy = MEMKIT_POLICY_ARENA;
  options.memory_limit = std::size_t{256} << 20;
  options.cache_limit = std::size_t{64} << 20;
  options.thread_cache = 0;
  memkit_allocator* alloc = nullptr;
  ASSERT_EQ(memkit_allocator_create_with_options(device, &options, &alloc), MEMKIT_OK);
  std::size_t limit = 0;
  ASSERT_EQ(memkit_get_memory_limit(alloc, &limit), MEMKIT_OK);
  EXPECT_EQ(limit, std::size_t{256} << 20);
  ASSERT_EQ(memkit_get_cache_limit(alloc, &limit), MEMKIT_OK);
  EXPECT_EQ(limit, std::size_t{64} << 20);
  ASSERT_EQ(memkit_get_wired_limit(alloc, &limit), MEMKIT_OK);
  EXPECT_EQ(limit, 0u);

  std::uint64_t small = 0, large = 0;
  std::size_t large_size = 0;
  ASSERT_EQ(memkit_allocate(alloc, 1000, 0, &small, nullptr), MEMKIT_OK);
  ASSERT_EQ(memkit_allocate(alloc, std::size_t{8} << 20, 0, &large, &large_size), MEMKIT_OK);
  memkit_snapshot* snapshot = nullptr;
  ASSERT_EQ(memkit_snapshot_create(alloc, &snapshot), MEMKIT_OK);
  ASSERT_NE(snapshot, nullptr);
  std::size_t blocks = 0, live = 0, live_bytes = 0;
  bool found_small = false, found_large = false;
  for (std::size_t i = 0; i < snapshot->segment_count; ++i) {
    const memkit_segment_record& segment = snapshot->segments[i];
    std::size_t tiled = 0;
    for (std::size_t j = 0; j < segment.block_count; ++j) {
      const memkit_block_record& block = segment.blocks[j];
      EXPECT_EQ(block.offset, tiled) << "the blocks tile the segment";
      tiled += block.size;
      if (!block.live) continue;
      ++live;
      live_bytes += block.size;
      found_small |= segment.base + block.offset == small;
      found_large |= segment.base + block.offset == large;
    }
    EXPECT_EQ(tiled, segment.size);
    blocks += segment.block_count;
  }
  EXPECT_EQ(blocks, snapshot->block_count);
  EXPECT_EQ(live, 2u);
  EXPECT_TRUE(found_small && found_large);
  memkit_statistics s;
  ASSERT_EQ(memkit_get_statistics(alloc, &s), MEMKIT_OK);
  EXPECT_EQ(live_bytes, s.active_bytes);
  memkit_snapshot_destroy(snapshot);
  memkit_snapshot_destroy(nullptr);

  EXPECT_EQ(memkit_free(alloc, small), MEMKIT_OK);
  EXPECT_EQ(memkit_free(alloc, large), MEMKIT_OK);
  memkit_allocator_destroy(alloc);
  memkit_backend_destroy(device);
}

TEST(capi, bad_options_and_null_arguments_of_the_new_calls) {
  auto last_error_names = [](const char* what) {
    return std::string(memkit_last_error()).find(what) != std::string::npos;
  };
  memkit_backend* device = memkit_sim_backend_create(std::size_t{1} << 30, 0);
  ASSERT_NE(device, nullptr);
  memkit_allocator_options options;
  ASSERT_EQ(memkit_allocator_options_init(&options), MEMKIT_OK);
  memkit_allocator* alloc = reinterpret_cast<memkit_allocator*>(&options);  // overwritten
  options.arena_slack = -1;
  EXPECT_EQ(memkit_allocator_create_with_options(device, &options, &alloc),
            MEMKIT_INVALID_ARGUMENT);
  EXPECT_EQ(alloc, nullptr);
  EXPECT_TRUE(last_error_names("[memkit_allocator_create_with_options] arena_slack"));
  options.arena_slack = 0;
  options.policy = static_cast<memkit_policy>(3);
  EXPECT_EQ(memkit_allocator_create_with_options(device, &options, &alloc),
            MEMKIT_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_names("policy 3 is not a memkit_policy"));
  EXPECT_EQ(memkit_allocator_create_with_options(nullptr, nullptr, &alloc),
            MEMKIT_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_names("[memkit_allocator_create_with_options] backend is NULL"));
  EXPECT_EQ(memkit_allocator_create_with_options(device, nullptr, nullptr),
            MEMKIT_INVALID_ARGUMENT);
  EXPECT_EQ(memkit_allocator_options_init(nullptr), MEMKIT_INVALID_ARGUMENT);

  ASSERT_EQ(memkit_allocator_create_with_options(device, nullptr, &alloc), MEMKIT_OK);
  std::size_t value = 0;
  EXPECT_EQ(memkit_get_memory_limit(nullptr, &value), MEMKIT_INVALID_ARGUMENT);
  EXPECT_EQ(memkit_get_cache_limit(alloc, nullptr), MEMKIT_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_names("[memkit_get_cache_limit] out is NULL"));
  EXPECT_EQ(memkit_get_wired_limit(nullptr, &value), MEMKIT_INVALID_ARGUMENT);
  EXPECT_EQ(memkit_allocate(alloc, 64, 0, nullptr, nullptr), MEMKIT_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_names("[memkit_allocate] address is NULL"));
  memkit_snapshot* snapshot = nullptr;
  EXPECT_EQ(memkit_snapshot_create(nullptr, &snapshot), MEMKIT_INVALID_ARGUMENT);
  EXPECT_EQ(memkit_snapshot_create(alloc, nullptr), MEMKIT_INVALID_ARGUMENT);
  memkit_statistics s;
  ASSERT_EQ(memkit_get_statistics(alloc, &s), MEMKIT_OK);
  EXPECT_EQ(s.allocations, 0u) << "the failed calls changed nothing";
  memkit_allocator_destroy(alloc);
  memkit_backend_destroy(device);
}

// Without the backend in the build, or without a device: a status, no crash.
TEST(capi, gpu_backends_report_unavailable) {
  memkit_backend* backend = reinterpret_cast<memkit_backend*>(&backend);  // overwritten
  const memkit_status cuda = memkit_cuda_backend_create(0, MEMKIT_CUDA_DEVICE, &backend);
  if (cuda == MEMKIT_OK) {
    memkit_backend_destroy(backend);
  } else {
    EXPECT_EQ(cuda, MEMKIT_UNAVAILABLE) << memkit_last_error();
    EXPECT_EQ(backend, nullptr);
    EXPECT_TRUE(std::string(memkit_last_error()).starts_with("[memkit_cuda_backend_create]"));
  }
  EXPECT_EQ(memkit_cuda_backend_create(0, MEMKIT_CUDA_DEVICE, nullptr), MEMKIT_INVALID_ARGUMENT);
  const memkit_status vulkan = memkit_vulkan_backend_create(-1, 0, &backend);
  if (vulkan == MEMKIT_OK) {
    memkit_backend_destroy(backend);
  } else {
    EXPECT_EQ(vulkan, MEMKIT_UNAVAILABLE) << memkit_last_error();
    EXPECT_EQ(backend, nullptr);
  }
  EXPECT_EQ(memkit_vulkan_backend_create(-1, 0, nullptr), MEMKIT_INVALID_ARGUMENT);
}

TEST(capi, records_calls_to_a_trace) {
  memkit_backend* sim = memkit_sim_backend_create(0, 0);
  memkit_allocator* a = memkit_allocator_create(sim);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(memkit_start_recording(a, nullptr), MEMKIT_INVALID_ARGUMENT);
  EXPECT_EQ(memkit_start_recording(nullptr, "x.csv"), MEMKIT_INVALID_ARGUMENT);
  EXPECT_EQ(memkit_start_recording(a, "/nonexistent-dir/x.csv"), MEMKIT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(memkit_last_error()).find("/nonexistent-dir/x.csv"), std::string::npos);
  const std::string path = ::testing::TempDir() + "memkit_capi_record.csv";
  ASSERT_EQ(memkit_start_recording(a, path.c_str()), MEMKIT_OK);
  std::uint64_t address = 0;
  std::size_t size = 0;
  ASSERT_EQ(memkit_allocate(a, 3 << 20, 0, &address, &size), MEMKIT_OK);
  ASSERT_EQ(memkit_free(a, address), MEMKIT_OK);
  std::uint64_t events = 0;
  EXPECT_EQ(memkit_stop_recording(a, &events), MEMKIT_OK);
  EXPECT_EQ(events, 2u);
  EXPECT_EQ(memkit_stop_recording(a, nullptr), MEMKIT_OK);  // none under way
  std::remove(path.c_str());
  memkit_allocator_destroy(a);
  memkit_backend_destroy(sim);
}

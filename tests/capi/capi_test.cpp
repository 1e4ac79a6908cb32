#include <gtest/gtest.h>

#include <string>

#include "memkit/memkit.h"

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

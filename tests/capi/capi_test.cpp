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

// The simulated device's virtual memory: host memory follows what is mapped, not
// what is reserved, so any granularity and any reservation stay cheap.
#include <gtest/gtest.h>

#include "memkit/memkit.hpp"

namespace memkit {
namespace {

TEST(sim_virtual_memory, a_huge_reservation_at_granularity_one_costs_nothing) {
  sim_options o;
  o.granularity = 1;
  o.capacity = std::size_t{1} << 40;
  sim_backend sim(o);
  const address_t base = sim.reserve_range(std::size_t{1} << 50);  // 2^50 granules
  ASSERT_NE(base, 0u);
  const page_id page = sim.create_page(4096);
  ASSERT_NE(page, 0u);
  sim.map(base + 8192, page, 4096);
  EXPECT_EQ(sim.get_mapping(base + 8192), page);
  EXPECT_EQ(sim.get_mapping(base + 8192 + 4095), page);
  EXPECT_EQ(sim.get_mapping(base + 8191), 0u);
  EXPECT_EQ(sim.get_mapping(base + 8192 + 4096), 0u);
  EXPECT_THROW(sim.map(base + 8192 + 100, page, 4096), invalid_argument);  // overlaps
  EXPECT_THROW(sim.release_range(base, std::size_t{1} << 50), invalid_argument);
  sim.unmap(base + 8192, 4096);
  sim.release_page(page, 4096);
  sim.release_range(base, std::size_t{1} << 50);
  // Past the top of the address space: refused, not wrapped around.
  EXPECT_EQ(sim.reserve_range(~std::size_t{0} - 4096), 0u);
}

// As on CUDA, a physical page may be mapped at several addresses (the arena's
// shadows), and goes back only once unmapped at every one.
TEST(sim_virtual_memory, a_page_maps_at_two_addresses_and_is_released_after_both) {
  sim_options o;
  o.granularity = 4096;
  sim_backend sim(o);
  const address_t base = sim.reserve_range(4 * 4096);
  const page_id page = sim.create_page(4096);
  sim.map(base, page, 4096);
  sim.map(base + 2 * 4096, page, 4096);
  EXPECT_EQ(sim.get_mapping(base), page);
  EXPECT_EQ(sim.get_mapping(base + 2 * 4096), page);
  sim.unmap(base, 4096);
  EXPECT_THROW(sim.release_page(page, 4096), invalid_argument) << "still mapped once";
  sim.unmap(base + 2 * 4096, 4096);
  sim.release_page(page, 4096);
  sim.release_range(base, 4 * 4096);
}

TEST(sim_virtual_memory, a_partial_unmap_splits_the_mapping) {
  sim_options o;
  o.granularity = 4096;
  sim_backend sim(o);
  const address_t base = sim.reserve_range(1 << 20);
  const page_id page = sim.create_page(4 * 4096);
  sim.map(base, page, 4 * 4096);
  sim.unmap(base + 4096, 4096);  // the second granule only
  EXPECT_EQ(sim.get_mapping(base), page);
  EXPECT_EQ(sim.get_mapping(base + 4096), 0u);
  EXPECT_EQ(sim.get_mapping(base + 2 * 4096), page);
  EXPECT_THROW(sim.set_access(base, 4 * 4096), invalid_argument);    // a hole
  EXPECT_THROW(sim.unmap(base, 2 * 4096), invalid_argument);         // half unmapped
  EXPECT_THROW(sim.release_page(page, 4 * 4096), invalid_argument);  // still mapped
  sim.set_access(base + 2 * 4096, 2 * 4096);
  sim.unmap(base, 4096);
  sim.unmap(base + 2 * 4096, 2 * 4096);
  EXPECT_EQ(sim.get_counters().mapped_bytes, 0u);
  sim.release_page(page, 4 * 4096);
  sim.release_range(base, 1 << 20);
}

// Setting access over a range costs what the driver does: once for each mapping the
// call covers (three pages mapped one by one), once for one mapping of three pages.
TEST(sim_virtual_memory, setting_access_costs_once_for_each_mapping_it_covers) {
  sim_options o;
  o.granularity = 4096;
  sim_backend sim(o);
  const address_t base = sim.reserve_range(8 * 4096);
  page_id pages[3];
  for (int k = 0; k < 3; ++k) {
    pages[k] = sim.create_page(4096);
    sim.map(base + static_cast<std::size_t>(k) * 4096, pages[k], 4096);
  }
  const page_id wide = sim.create_page(3 * 4096);
  sim.map(base + 4 * 4096, wide, 3 * 4096);
  std::uint64_t before = sim.get_counters().simulated_ns;
  sim.set_access(base, 3 * 4096);
  EXPECT_EQ(sim.get_counters().simulated_ns - before, 3 * o.set_access_ns);
  before = sim.get_counters().simulated_ns;
  sim.set_access(base + 4 * 4096, 3 * 4096);
  EXPECT_EQ(sim.get_counters().simulated_ns - before, o.set_access_ns);
  before = sim.get_counters().simulated_ns;
  sim.set_access(base + 4096, 4096);  // the middle page alone
  EXPECT_EQ(sim.get_counters().simulated_ns - before, o.set_access_ns);
  EXPECT_EQ(sim.get_counters().set_accesses, 3u);
  for (int k = 0; k < 3; ++k) sim.unmap(base + static_cast<std::size_t>(k) * 4096, 4096);
  sim.unmap(base + 4 * 4096, 3 * 4096);
  for (const page_id page : pages) sim.release_page(page, 4096);
  sim.release_page(wide, 3 * 4096);
  sim.release_range(base, 8 * 4096);
}

TEST(sim_virtual_memory, the_arena_maps_pages_of_at_least_4_kib) {
  sim_options o;
  o.granularity = 1;
  sim_backend sim(o);
  allocator_options options;
  options.policy = pool_policy::arena;
  options.validate = true;
  allocator a(sim, options);
  const allocation block = a.allocate(3 << 20);
  EXPECT_EQ(sim.get_counters().maps, (3u << 20) / 4096);  // not one per byte
  a.free(block.address);
}

}  // namespace
}  // namespace memkit

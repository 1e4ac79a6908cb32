#include "placement/free_index.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace memkit::placement {
namespace {

TEST(free_index, bins_are_monotonic_and_narrow) {
  std::uint32_t last = 0;
  for (std::uint64_t size = 1; size < (std::uint64_t{1} << 40); size += size / 7 + 1) {
    const std::uint32_t bin = free_index::bin_of(size);
    EXPECT_GE(bin, last);
    last = bin;
  }
  // Sizes in one bin differ by at most 1/32.
  for (std::uint64_t size = 32; size < (std::uint64_t{1} << 40); size += size / 5 + 3) {
    EXPECT_GT(free_index::bin_of(size + size / 32 + 1), free_index::bin_of(size)) << size;
  }
}

TEST(free_index, find_is_best_fit_against_a_brute_force_search) {
  std::mt19937_64 rng(5);
  std::vector<free_node> nodes(2000);
  free_index index;
  for (auto& n : nodes) {
    n.size = 512 * (1 + rng() % 20000);
    index.insert(&n);
  }
  for (int i = 0; i < 2000; ++i) {
    const std::uint64_t want = 512 * (1 + rng() % 22000);
    free_node* got = index.find(want, [](const free_node*) { return true; });
    std::uint64_t best = 0;
    for (const auto& n : nodes)
      if (n.indexed && n.size >= want && (!best || n.size < best)) best = n.size;
    if (!best) {
      EXPECT_EQ(got, nullptr);
      continue;
    }
    ASSERT_NE(got, nullptr);
    // Best fit in the request's bin; otherwise within one bin's width of the best.
    EXPECT_GE(got->size, want);
    EXPECT_LE(got->size, best + best / 16);
    if (i % 3 == 0) index.remove(got);
  }
}

TEST(free_index, accept_filters_and_largest_is_exact) {
  free_node a, b, c;
  a.size = 1000;
  b.size = 5000;
  c.size = 4000;
  free_index index;
  for (free_node* n : {&a, &b, &c}) index.insert(n);
  EXPECT_EQ(index.calculate_largest(), 5000u);
  EXPECT_EQ(index.find(3000, [&](const free_node* n) { return n != &c; }), &b);
  index.remove(&b);
  EXPECT_EQ(index.calculate_largest(), 4000u);
  EXPECT_EQ(index.get_count(), 2u);
  EXPECT_EQ(index.find(4500, [](const free_node*) { return true; }), nullptr);
}

}  // namespace
}  // namespace memkit::placement

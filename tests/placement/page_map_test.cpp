// The page map's bitmap of usable pages (mapped, not being mapped): counts and run
// starts agree with the pages, across word boundaries.
#include "placement/page_map.hpp"

#include <gtest/gtest.h>

#include <random>

namespace memkit::placement {
namespace {

bool usable(const page_map& pages, std::uint64_t i) {
  return i < pages.get_count() && pages.get(static_cast<std::uint32_t>(i)).physical != 0 &&
         !pages.get(static_cast<std::uint32_t>(i)).busy;
}

TEST(page_map, usable_pages_are_mapped_and_not_busy) {
  page_map pages;
  pages.set_physical(3, 7);
  EXPECT_TRUE(pages.is_usable(3));
  EXPECT_FALSE(pages.is_usable(2));
  EXPECT_FALSE(pages.is_usable(100)) << "past the last page";
  pages.set_busy(3, true);
  EXPECT_FALSE(pages.is_usable(3));
  pages.set_busy(3, false);
  pages.set_physical(3, 0);
  EXPECT_FALSE(pages.is_usable(3));
}

TEST(page_map, counts_runs_and_holes_agree_with_the_pages) {
  std::mt19937_64 rng(5);
  for (int round = 0; round < 50; ++round) {
    page_map pages;
    const std::uint32_t count = 1 + static_cast<std::uint32_t>(rng() % 300);
    for (std::uint32_t i = 0; i < count; ++i) {
      pages.set_physical(i, rng() % 3 ? i + 1 : 0);
      if (rng() % 7 == 0) pages.set_busy(i, true);
    }
    for (int probe = 0; probe < 200; ++probe) {
      const std::uint64_t first = rng() % (count + 70);
      const std::uint64_t last = first + rng() % 150;
      std::uint64_t expected = 0;
      for (std::uint64_t i = first; i <= last; ++i) expected += usable(pages, i);
      ASSERT_EQ(pages.count_usable(first, last), expected) << first << ".." << last;
      std::uint64_t start = page_map::kNoPage;
      for (std::uint64_t i = first; i <= last && i < count; ++i) {
        if (usable(pages, i) && (i == 0 || !usable(pages, i - 1))) {
          start = i;
          break;
        }
      }
      ASSERT_EQ(pages.find_run_start(first, last), start) << first << ".." << last;
      std::uint64_t unusable = last + 1;
      for (std::uint64_t i = first; i <= last; ++i) {
        if (!usable(pages, i)) {
          unusable = i;
          break;
        }
      }
      ASSERT_EQ(pages.find_unusable(first, last), unusable) << first << ".." << last;
    }
  }
}

}  // namespace
}  // namespace memkit::placement

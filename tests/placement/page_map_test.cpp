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

// The idle bitmap (arena::find_victims scans it downwards) agrees with the idle list,
// across word boundaries, as pages become idle and are taken.
TEST(page_map, the_highest_idle_page_below_a_bound_agrees_with_the_pages) {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 50; ++round) {
    page_map pages;
    const std::uint32_t count = 1 + static_cast<std::uint32_t>(rng() % 300);
    for (std::uint32_t i = 0; i < count; ++i) {
      pages.set_physical(i, i + 1);
      pages.add_user(i);
      if (rng() % 2) pages.remove_user(i, 0, i);  // idle now
    }
    for (std::uint32_t i = 0; i < count; ++i) {
      if (pages.get(i).idle && rng() % 4 == 0) pages.add_user(i);  // taken again
    }
    for (int probe = 0; probe < 200; ++probe) {
      const auto from = static_cast<std::uint32_t>(rng() % (count + 70));
      const auto to = static_cast<std::uint32_t>(from + rng() % 140);
      std::uint32_t expected = page_map::kNone;
      for (std::uint32_t i = std::min(to, count - 1) + 1; i-- > from;) {
        if (i < count && pages.get(i).idle) {
          expected = i;
          break;
        }
      }
      EXPECT_EQ(pages.find_idle_below(to, from), expected) << "[" << from << ", " << to << "]";
    }
  }
}

}  // namespace
}  // namespace memkit::placement

// The page map's bitmap of usable pages (mapped, not being mapped): counts and run
// starts agree with the pages, across word boundaries.
#include "placement/page_map.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

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

// The idle bitmap (arena::find_victims scans it downwards) agrees with the pages' idle
// marks, across word boundaries, as pages become idle and are taken.
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

// add_users and remove_users over a block's pages do what add_user and remove_user do
// page by page (the hot path takes the range form): the same marks, idle count and
// bitmap, across word boundaries and over pages shared with neighbouring blocks.
TEST(page_map, users_added_and_removed_over_a_range_match_page_by_page) {
  std::mt19937_64 rng(17);
  for (int round = 0; round < 50; ++round) {
    page_map by_range;
    page_map by_page;
    const std::uint32_t count = 1 + static_cast<std::uint32_t>(rng() % 300);
    for (std::uint32_t i = 0; i < count; ++i) {
      const page_id physical = rng() % 5 ? i + 1 : 0;  // some pages unmapped
      by_range.set_physical(i, physical);
      by_page.set_physical(i, physical);
    }
    std::vector<std::pair<std::uint32_t, std::uint32_t>> live;
    for (int op = 0; op < 200; ++op) {
      if (live.empty() || rng() % 2) {
        const auto first = static_cast<std::uint32_t>(rng() % count);
        const auto last =
            std::min<std::uint32_t>(count - 1, first + static_cast<std::uint32_t>(rng() % 130));
        by_range.add_users(first, last);
        for (std::uint32_t i = first; i <= last; ++i) by_page.add_user(i);
        live.emplace_back(first, last);
      } else {
        const std::size_t k = rng() % live.size();
        const auto [first, last] = live[k];
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
        const auto serial = static_cast<serial_t>(op);
        bool idled = false;
        for (std::uint32_t i = first; i <= last; ++i) idled |= by_page.remove_user(i, 1, serial);
        ASSERT_EQ(by_range.remove_users(first, last, 1, serial), idled);
      }
      ASSERT_EQ(by_range.get_idle_count(), by_page.get_idle_count());
      for (std::uint32_t i = 0; i < count; ++i) {
        const page_map::page& a = by_range.get(i);
        const page_map::page& b = by_page.get(i);
        ASSERT_EQ(a.users, b.users) << i;
        ASSERT_EQ(a.idle, b.idle) << i;
        ASSERT_TRUE(!a.idle || (a.users == 0 && a.physical != 0)) << i;
        ASSERT_EQ(by_range.find_idle_below(i, i) == i, a.idle) << i;
        if (a.idle) {
          ASSERT_EQ(a.free_serial, b.free_serial) << i;
        }
      }
    }
  }
}

// Idle pages by age: in the order they became idle, the pages of one free lowest
// first; a page used again and left idle later is newer than the rest.
TEST(page_map, idle_pages_by_age_are_in_the_order_they_became_idle) {
  page_map pages;
  for (std::uint32_t i = 0; i < 200; ++i) pages.set_physical(i, i + 1);
  pages.add_users(100, 140);
  pages.add_users(10, 12);
  pages.add_users(150, 151);
  pages.remove_users(100, 140, 0, 1);  // oldest
  pages.remove_users(10, 12, 0, 2);
  pages.add_user(120);           // used again ...
  pages.remove_user(120, 0, 3);  // ... and idle last
  pages.remove_users(150, 151, 0, 4);
  std::vector<std::uint32_t> expected;
  for (std::uint32_t i = 100; i <= 140; ++i) {
    if (i != 120) expected.push_back(i);
  }
  expected.insert(expected.end(), {10, 11, 12, 120, 150, 151});
  EXPECT_EQ(pages.calculate_idle_by_age(), expected);
}

}  // namespace
}  // namespace memkit::placement

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
      if (pages.is_idle(i) && rng() % 4 == 0) pages.add_user(i);  // taken again
    }
    for (int probe = 0; probe < 200; ++probe) {
      const auto from = static_cast<std::uint32_t>(rng() % (count + 70));
      const auto to = static_cast<std::uint32_t>(from + rng() % 140);
      std::uint32_t expected = page_map::kNone;
      for (std::uint32_t i = std::min(to, count - 1) + 1; i-- > from;) {
        if (i < count && pages.is_idle(i)) {
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
// bitmap, across word boundaries and over end pages shared with neighbouring blocks.
// Blocks are byte ranges that do not overlap (a page in quarters here), as in the
// arena: a page strictly inside one is touched by no other.
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
    std::vector<bool> used(std::size_t{count} * 4, false);      // quarters of pages
    std::vector<std::pair<std::uint32_t, std::uint32_t>> live;  // blocks, in quarters
    for (int op = 0; op < 200; ++op) {
      if (live.empty() || rng() % 2) {
        const auto start = static_cast<std::uint32_t>(rng() % used.size());
        const auto end =
            std::min<std::uint32_t>(static_cast<std::uint32_t>(used.size()),
                                    start + 1 + static_cast<std::uint32_t>(rng() % 520));
        if (std::find(used.begin() + start, used.begin() + end, true) != used.begin() + end)
          continue;  // not free
        std::fill(used.begin() + start, used.begin() + end, true);
        const std::uint32_t first = start / 4;
        const std::uint32_t last = (end - 1) / 4;
        by_range.add_users(first, last);
        for (std::uint32_t i = first; i <= last; ++i) by_page.add_user(i);
        live.emplace_back(start, end);
      } else {
        const std::size_t k = rng() % live.size();
        const auto [start, end] = live[k];
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
        std::fill(used.begin() + start, used.begin() + end, false);
        const std::uint32_t first = start / 4;
        const std::uint32_t last = (end - 1) / 4;
        const auto serial = static_cast<serial_t>(op);
        const queue_id queue = static_cast<queue_id>(op % 3);
        bool idled = false;
        for (std::uint32_t i = first; i <= last; ++i)
          idled |= by_page.remove_user(i, queue, serial);
        ASSERT_EQ(by_range.remove_users(first, last, queue, serial), idled);
      }
      ASSERT_EQ(by_range.get_idle_count(), by_page.get_idle_count());
      for (std::uint32_t i = 0; i < count; ++i) {
        const bool idle = by_range.is_idle(i);
        ASSERT_EQ(by_range.get_users(i), by_page.get_users(i)) << i;
        ASSERT_EQ(idle, by_page.is_idle(i)) << i;
        ASSERT_TRUE(!idle || (by_range.get_users(i) == 0 && by_range.get(i).physical != 0)) << i;
        ASSERT_EQ(by_range.find_idle_below(i, i) == i, idle) << i;
        if (idle) {
          ASSERT_EQ(by_range.get_free_serial(i), by_page.get_free_serial(i)) << i;
          ASSERT_EQ(by_range.get_queue(i), by_page.get_queue(i)) << i;
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

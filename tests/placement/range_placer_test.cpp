// The sub-range placer on numbers alone: containers of ranges, split, merged by a
// caller's rule, found by a caller's accept test, by size or by offset.
#include "placement/range_placer.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace memkit::placement {
namespace {

struct range : range_node {
  std::uint32_t container = 0;
  bool live = false;
  void reset() { *this = range{}; }
  void inherit(const range& from) { container = from.container; }
};

// Ranges of one container, lowest first, as (offset, size, live).
struct piece {
  std::uint64_t offset, size;
  bool live;
  friend bool operator==(const piece&, const piece&) = default;
};
std::vector<piece> walk(const range* first) {
  std::vector<piece> pieces;
  for (auto* r = first; r; r = static_cast<const range*>(r->next_range))
    pieces.push_back({r->offset, r->size, r->live});
  return pieces;
}

range* take(range_placer<range>& placer, std::uint64_t size, std::uint32_t excluded) {
  range* r = placer.find(size, [&](const range* f) { return f->container != excluded; });
  if (!r) return nullptr;
  placer.unfile(r);
  if (r->size > size) placer.file(placer.split(r, size));
  r->live = true;
  return r;
}

void give_back(range_placer<range>& placer, range* r) {
  r->live = false;
  placer.file(placer.release(r, [](const range*, const range*) { return true; }));
}

TEST(range_placer, splits_merges_and_excludes_containers) {
  range_placer<range> placer;
  range* a = placer.make_container(4096);
  a->container = 1;
  placer.file(a);
  range* b = placer.make_container(1024);
  b->container = 2;
  placer.file(b);

  range* x = take(placer, 1024, 0);  // best fit: container 2, exactly
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->container, 2u);
  range* y = take(placer, 512, 0);  // the rest: container 1, split
  ASSERT_NE(y, nullptr);
  EXPECT_EQ(y->container, 1u);
  EXPECT_EQ(take(placer, 512, 1), nullptr);  // container 1 excluded, 2 full
  range* z = take(placer, 512, 2);
  ASSERT_NE(z, nullptr);
  EXPECT_EQ(walk(a), (std::vector<piece>{{0, 512, true}, {512, 512, true}, {1024, 3072, false}}));
  EXPECT_EQ(placer.get_filed_count(), 1u);
  EXPECT_EQ(placer.calculate_largest(), 3072u);

  give_back(placer, y);  // no free neighbour below, a live one above: stays apart
  EXPECT_EQ(walk(a), (std::vector<piece>{{0, 512, false}, {512, 512, true}, {1024, 3072, false}}));
  give_back(placer, z);  // merges both ways: the container is whole again
  EXPECT_EQ(walk(a), (std::vector<piece>{{0, 4096, false}}));
  EXPECT_EQ(placer.get_filed_count(), 1u);
  give_back(placer, x);
  EXPECT_EQ(placer.get_filed_count(), 2u);
}

TEST(range_placer, the_merge_rule_decides_which_neighbours_join) {
  range_placer<range> placer;
  range* whole = placer.make_container(3000);
  placer.file(whole);
  range* low = take(placer, 1000, 9);
  range* mid = take(placer, 1000, 9);
  range* high = take(placer, 1000, 9);
  ASSERT_TRUE(low && mid && high);
  give_back(placer, low);
  give_back(placer, high);
  // A rule that refuses to join anything below: mid merges upward only.
  mid->live = false;
  int asked = 0;
  range* merged = placer.release(mid, [&](const range* lower, const range*) {
    ++asked;
    return lower != low;
  });
  placer.file(merged);
  EXPECT_EQ(asked, 2);
  EXPECT_EQ(walk(low), (std::vector<piece>{{0, 1000, false}, {1000, 2000, false}}));
}

TEST(range_placer, by_offset_finds_the_range_holding_a_place) {
  range_placer<range> placer;
  placer.set_index_by_offset(true);
  range* whole = placer.make_container(1 << 20);
  placer.file(whole);
  range* found = placer.find_at(4096, 8192);
  ASSERT_EQ(found, whole);
  placer.unfile(found);
  range* rest = placer.split(found, 4096);  // [0, 4096) stays free
  placer.file(found);
  range* above = placer.split(rest, 8192);  // [4096, 12288) is taken
  placer.file(above);
  rest->live = true;
  EXPECT_EQ(placer.find_at(4096, 1), nullptr);
  EXPECT_EQ(placer.find_at(0, 4096), found);
  EXPECT_EQ(placer.find_at(12288, 4096), above);
  EXPECT_EQ(placer.find(512, [](const range*) { return true; }), nullptr);  // no size index
  std::uint64_t entries = 0;
  placer.for_each_by_offset([&](std::uint64_t offset, const range* r) {
    EXPECT_EQ(offset, r->offset);
    ++entries;
  });
  EXPECT_EQ(entries, 2u);
  EXPECT_EQ(placer.calculate_largest(), (1u << 20) - 12288);
}

TEST(range_placer, random_takes_and_gives_keep_containers_tiled_and_merged) {
  std::mt19937_64 rng(11);
  range_placer<range> placer;
  std::vector<range*> firsts;
  for (std::uint32_t c = 0; c < 4; ++c) {
    range* whole = placer.make_container(std::uint64_t{64} << 10);
    whole->container = c;
    placer.file(whole);
    firsts.push_back(whole);
  }
  std::vector<range*> live;
  for (int step = 0; step < 20000; ++step) {
    if (live.empty() || rng() % 2) {
      if (range* r = take(placer, 256 * (1 + rng() % 32), static_cast<std::uint32_t>(rng() % 5)))
        live.push_back(r);
    } else {
      const std::size_t k = rng() % live.size();
      give_back(placer, live[k]);
      live[k] = live.back();
      live.pop_back();
    }
  }
  for (range* r : live) give_back(placer, r);
  // Everything merged back: one free range per container, starting at its first.
  EXPECT_EQ(placer.get_filed_count(), 4u);
  for (const range* first : firsts) {
    while (first->prev_range) first = static_cast<const range*>(first->prev_range);
    EXPECT_EQ(walk(first), (std::vector<piece>{{0, std::uint64_t{64} << 10, false}}));
  }
}

}  // namespace
}  // namespace memkit::placement

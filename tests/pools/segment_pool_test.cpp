#include "pools/segment_pool.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

namespace memkit::pools {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

std::vector<std::size_t> get_free_sizes(const segment_pool& pool) {
  std::vector<std::size_t> sizes;
  for (const segment* s : pool.get_segments()) {
    for (const block* b = s->first; b; b = static_cast<const block*>(b->next_range)) {
      sizes.push_back(b->live ? 0 : b->size);
    }
  }
  return sizes;
}

// A block freed next to a neighbour that had stood apart from its own upper
// neighbour (their fence states differed then, equal now) joins all of them at
// once: otherwise the segment stays split until the next merge pass, and an
// all-free segment could not go back to the device.
TEST(segment_pool, a_free_joins_every_neighbour_its_state_now_allows) {
  std::array<std::uint64_t, 1> safe_serial{0};
  segment_pool pool(false, safe_serial.data());
  pool.add_free_segment(0x100000000, 4 * MiB);
  block* a = pool.take(MiB, 0);
  block* b = pool.take(MiB, 0);
  block* c = pool.take(MiB, 0);
  ASSERT_TRUE(a && b && c);
  pool.give_back(c, 5);  // queue 0 has not passed serial 5: apart from the safe tail
  pool.give_back(b, 0);  // safe: apart from c, which is not yet
  EXPECT_EQ(get_free_sizes(pool), (std::vector<std::size_t>{0, MiB, MiB, MiB}));
  safe_serial[0] = 10;   // the fence passed; no merge pass has run yet
  pool.give_back(a, 0);  // joins b, then c, then the tail
  EXPECT_EQ(get_free_sizes(pool), (std::vector<std::size_t>{4 * MiB}));
  EXPECT_TRUE(pool.is_releasable(pool.get_segments().front()));
  std::size_t live = 0, free = 0, blocks = 0, requested = 0;
  pool.validate(&live, &free, &blocks, &requested);
  EXPECT_EQ(free, 4 * MiB);
}

// The small pool takes, of the first few blocks that fit, the one in the
// lowest-addressed segment, though a higher segment holds a tighter fit: the blocks
// that outlive a burst gather in the oldest segments, and a burst's segments empty.
TEST(segment_pool, the_small_pool_fills_its_lowest_segment_first) {
  constexpr std::size_t KiB = 1024;
  constexpr address_t low = 0x100000000, high = 0x200000000;
  std::array<std::uint64_t, 1> safe_serial{0};
  segment_pool pool(true, safe_serial.data());
  block* hole = pool.add_segment(high, 2 * MiB, 64 * KiB, 0);
  block* rest = pool.take(2 * MiB - 64 * KiB, 0);  // the high segment is full
  ASSERT_TRUE(hole && rest);
  ASSERT_EQ(rest->owner->base, high);
  block* old = pool.add_segment(low, 2 * MiB, MiB, 0);  // 1 MiB free in the low one
  pool.give_back(hole, 0);                              // 64 KiB free in the high one
  block* taken = pool.take(64 * KiB, 0);
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(taken->owner->base, low) << "not the exact fit in the higher segment";
  pool.give_back(rest, 0);
  EXPECT_TRUE(pool.is_releasable(rest->owner)) << "the high segment emptied";
  pool.give_back(taken, 0);
  pool.give_back(old, 0);
}

}  // namespace
}  // namespace memkit::pools

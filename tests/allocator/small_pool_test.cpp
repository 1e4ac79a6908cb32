// Which pool a request goes to. Beside an arena the small pool keeps requests up to
// 512 KiB: a 2 MiB segment holds only one 1 MiB block beside anything else, so one
// left live strands the rest; the arena packs them and shares pages.
#include <gtest/gtest.h>

#include <vector>

#include "memkit/memkit.hpp"

namespace memkit {
namespace {

constexpr std::size_t KiB = std::size_t{1} << 10;
constexpr std::size_t MiB = std::size_t{1} << 20;

struct interleaved_run {
  statistics stats;
  std::size_t small_segment_bytes = 0;  // in segments of the small pool
};

// 100 blocks of 1 MiB, each followed by a 1 KiB one, all live at once.
interleaved_run run_interleaved(pool_policy policy) {
  sim_options o;
  o.capacity = std::size_t{1} << 30;
  sim_backend device(o);
  allocator alloc(device, {.policy = policy, .validate = true});
  std::vector<allocation> live;
  for (int k = 0; k < 100; ++k) {
    live.push_back(alloc.allocate(1 * MiB));
    live.push_back(alloc.allocate(1 * KiB));
  }
  interleaved_run r{alloc.get_statistics(), 0};
  for (const segment_view& v : alloc.calculate_segments()) {
    if (v.small) r.small_segment_bytes += v.size;
  }
  for (const allocation& a : live) alloc.free(a.address);
  return r;
}

TEST(small_pool, beside_an_arena_megabyte_blocks_share_pages_in_the_arena) {
  const interleaved_run r = run_interleaved(pool_policy::arena);
  EXPECT_EQ(r.small_segment_bytes, 2 * MiB) << "only the 1 KiB blocks, in one segment";
  EXPECT_LE(static_cast<double>(r.stats.reserved_bytes),
            1.04 * static_cast<double>(r.stats.active_bytes));
}

TEST(small_pool, with_segments_megabyte_blocks_stay_in_the_small_pool) {
  const interleaved_run r = run_interleaved(pool_policy::segments);
  EXPECT_GE(r.small_segment_bytes, 100 * MiB) << "every 1 MiB block in a small segment";
}

}  // namespace
}  // namespace memkit

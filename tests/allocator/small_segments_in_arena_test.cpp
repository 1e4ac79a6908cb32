// allocator_options::small_segments_in_arena: the small pool's segments are pages of the
// arena, in a part of its range apart from the large blocks, so that a new one takes an
// idle page (or makes one) and an empty one goes back as an idle page, with no segment
// call either way.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "memkit/memkit.hpp"

namespace memkit {
namespace {

constexpr std::size_t KiB = std::size_t{1} << 10;
constexpr std::size_t MiB = std::size_t{1} << 20;

sim_options one_gib() {
  sim_options o;
  o.capacity = std::size_t{1} << 30;
  return o;
}

// Invariants checked after every call; no thread cache, so that every free reaches the
// pools; the floor (no slack), so that a page made past the peak would show.
allocator_options options(bool in_arena) {
  allocator_options o;
  o.policy = pool_policy::arena;
  o.validate = true;
  o.thread_cache = false;
  o.arena_slack = 0.0;
  o.small_segments_in_arena = in_arena;
  return o;
}

struct small_run {
  std::uint64_t segment_allocs = 0;
  std::uint64_t segment_frees = 0;
  std::size_t reserved_with_small = 0;
  std::size_t reserved_after_clear = 0;
};

// A 4 MiB block freed leaves two idle pages; then small blocks need a small segment.
small_run run(bool in_arena) {
  sim_backend device(one_gib());
  small_run r;
  {
    allocator alloc(device, options(in_arena));
    const allocation large = alloc.allocate(4 * MiB, 0);
    alloc.free(large.address);
    std::vector<allocation> small;
    for (int i = 0; i < 8; ++i) small.push_back(alloc.allocate(64 * KiB, 0));
    r.reserved_with_small = alloc.get_statistics().reserved_bytes;
    for (const allocation& a : small) alloc.free(a.address);
    alloc.clear_cache();
    r.reserved_after_clear = alloc.get_statistics().reserved_bytes;
    alloc.validate();
  }
  r.segment_allocs = device.get_counters().segment_allocs;
  r.segment_frees = device.get_counters().segment_frees;
  return r;
}

TEST(small_segments_in_arena, a_small_segment_takes_an_idle_page_with_no_segment_call) {
  const small_run r = run(true);
  EXPECT_EQ(r.segment_allocs, 0u);
  EXPECT_EQ(r.segment_frees, 0u);
  // The small segment is one of the two pages the large block left: nothing new.
  EXPECT_EQ(r.reserved_with_small, 4 * MiB);
  EXPECT_EQ(r.reserved_after_clear, 0u);
}

TEST(small_segments_in_arena, off_a_small_segment_is_a_segment_of_its_own) {
  const small_run r = run(false);
  EXPECT_EQ(r.segment_allocs, 1u);
  EXPECT_EQ(r.segment_frees, 1u);
  EXPECT_EQ(r.reserved_after_clear, 0u);
}

TEST(small_segments_in_arena, a_full_area_leaves_the_next_small_segments_to_the_backend) {
  sim_backend device(one_gib());
  allocator alloc(device, options(true));
  // The area holds a sixteenth of the range's addresses (8 x the capacity): 256 pages
  // here; 300 small segments of four 512 KiB blocks each pass it.
  std::vector<allocation> small;
  for (int i = 0; i < 1200; ++i) small.push_back(alloc.allocate(512 * KiB, 0));
  EXPECT_GT(device.get_counters().segment_allocs, 0u);
  EXPECT_EQ(alloc.get_statistics().reserved_bytes, alloc.calculate_statistics().reserved_bytes);
  for (const allocation& a : small) alloc.free(a.address);
  alloc.clear_cache();
  EXPECT_EQ(alloc.get_statistics().reserved_bytes, 0u);
  EXPECT_EQ(device.get_counters().segment_frees, device.get_counters().segment_allocs);
}

// A device whose next unmap, once armed, waits until the test lets it go: the releasing
// thread stays inside the call (its pages busy) while another thread allocates.
class paused_unmap final : public forwarded_memory {
 public:
  using forwarded_memory::forwarded_memory;
  void arm() {
    std::lock_guard lock(mutex_);
    armed_ = true;
  }
  // False when no unmap came within ten seconds.
  bool wait_until_inside() {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(10), [&] { return inside_; });
  }
  void let_go() {
    std::lock_guard lock(mutex_);
    armed_ = false;
    changed_.notify_all();
  }
  void unmap(address_t at, std::size_t bytes) override {
    {
      std::unique_lock lock(mutex_);
      inside_ = armed_;
      changed_.notify_all();
      changed_.wait(lock, [&] { return !armed_; });
    }
    forwarded_memory::unmap(at, bytes);
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool armed_ = false;
  bool inside_ = false;
};

TEST(small_segments_in_arena, a_small_segment_on_a_page_being_unmapped_places_itself_again) {
  sim_backend sim(one_gib());
  paused_unmap device(sim);
  allocator alloc(device, options(true));
  // A small segment on the area's first page, emptied: clear_cache unmaps that page.
  alloc.free(alloc.allocate(64 * KiB, 0).address);
  device.arm();
  std::thread releasing([&] { alloc.clear_cache(); });
  if (!device.wait_until_inside()) {
    device.let_go();
    releasing.join();
    FAIL() << "clear_cache unmapped no page";
  }
  // The next small segment takes the same page, finds it busy and waits for it; once
  // unmapped it is not the segment's, and until the waiting thread places the segment
  // again the invariants must hold (its block is live on an unmapped page meanwhile).
  std::atomic<bool> placed{false};
  allocation small{};
  std::thread placing([&] {
    small = alloc.allocate(64 * KiB, 0);
    placed = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // to reach the wait
  device.let_go();
  std::string violation;
  while (!placed && violation.empty()) {
    try {
      alloc.validate();
    } catch (const invariant_violation& e) {
      violation = e.what();
    }
  }
  releasing.join();
  placing.join();
  EXPECT_EQ(violation, "");
  alloc.free(small.address);
  alloc.validate();
  EXPECT_EQ(alloc.calculate_statistics(), alloc.get_statistics());
}

}  // namespace
}  // namespace memkit

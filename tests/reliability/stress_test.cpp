// Concurrency stress: many threads on several queues allocate mixed sizes, free
// blocks that other threads allocated, record uses on other queues, while another
// thread submits and completes work and changes the limits under them. Every block
// handed out is checked against all live ones for overlap; at the end every byte is
// accounted for and, after freeing all and clearing the cache, nothing is held.
// Selected for ThreadSanitizer by the name (scripts/test.sh: *stress*).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "memkit/adaptors/fault_injection.hpp"
#include "memkit/memkit.hpp"

namespace memkit {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

// Every live block, by address: an overlap means a block was handed out twice.
class live_registry {
 public:
  // Returns an empty string, or what went wrong.
  std::string insert(address_t address, std::size_t size) {
    std::lock_guard lock(mutex_);
    auto next = blocks_.lower_bound(address);
    if (next != blocks_.end() && address + size > next->first) return "overlaps the block above";
    if (next != blocks_.begin() && std::prev(next)->first + std::prev(next)->second > address)
      return "overlaps the block below";
    blocks_.emplace(address, size);
    return {};
  }
  // Taken out before the allocator's free, so no other thread can be handed it first.
  void erase(address_t address) {
    std::lock_guard lock(mutex_);
    blocks_.erase(address);
  }
  std::map<address_t, std::size_t> get_blocks() const {
    std::lock_guard lock(mutex_);
    return blocks_;
  }

 private:
  mutable std::mutex mutex_;
  std::map<address_t, std::size_t> blocks_;
};

// Blocks handed from one thread to another, which frees them.
class exchange {
 public:
  void push(address_t a) {
    std::lock_guard lock(mutex_);
    blocks_.push_back(a);
  }
  address_t pop() {
    std::lock_guard lock(mutex_);
    if (blocks_.empty()) return 0;
    const address_t a = blocks_.back();
    blocks_.pop_back();
    return a;
  }

 private:
  std::mutex mutex_;
  std::vector<address_t> blocks_;
};

struct stress_config {
  unsigned threads = 8;
  unsigned calls_per_thread = 3000;
  double fault_rate = 0.0;
  std::uint32_t completion_lag = 0;
  double page_fault_rate = 0.0;  // create_page and map calls that fail
  std::uint32_t unmap_delay_us = 0;
  bool small_segments_in_arena = false;
};

void run_stress(const stress_config& config) {
  sim_options o;
  o.capacity = 192 * MiB;
  o.queue_count = 4;
  o.auto_complete_after = 3;  // work finishes as more is submitted
  sim_backend device(o);
  fault_injection_options fo;
  fo.segments.rate = config.fault_rate;
  fo.segments.seed = 17;
  fo.completion_lag = config.completion_lag;
  fo.random_lag = true;
  fo.virtual_memory.rate = config.page_fault_rate;
  fo.virtual_memory.seed = 23;
  fo.vm_calls = vm_create_page | vm_map;
  fo.unmap_delay_us = config.unmap_delay_us;
  fault_injection_adaptor faults(device, fo);
  allocator alloc(faults,
                  {.validate = true, .small_segments_in_arena = config.small_segments_in_arena});
  live_registry registry;
  exchange handoff;
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> allocations{0}, frees{0}, oom_errors{0};
  std::mutex failure_mutex;
  std::vector<std::string> failures;
  auto fail = [&](const std::string& what) {
    std::lock_guard lock(failure_mutex);
    failures.push_back(what);
  };

  auto release = [&](address_t a) {
    registry.erase(a);
    alloc.free(a);
    frees++;
  };

  auto worker = [&](unsigned t) {
    std::mt19937_64 rng(1000 + t);
    const auto queue = static_cast<queue_id>(t % o.queue_count);
    std::vector<address_t> mine;
    for (unsigned i = 0; i < config.calls_per_thread; ++i) {
      const std::uint64_t r = rng() % 100;
      if (r < 45) {
        const std::uint64_t kind = rng() % 10;
        const std::size_t bytes = kind < 7   ? 1 + rng() % (64 << 10)
                                  : kind < 9 ? 1 + rng() % MiB
                                             : 1 + rng() % (8 * MiB);
        try {
          const allocation a = alloc.allocate(bytes, queue);
          allocations++;
          if (a.size < bytes) fail("a block smaller than its request");
          if (std::string e = registry.insert(a.address, a.size); !e.empty())
            fail("block handed out twice: " + e);
          // Before any hand-off: once another thread may free it, it is not ours to use.
          if (rng() % 8 == 0) alloc.record_use(a.address, static_cast<queue_id>(rng() % 4));
          if (rng() % 4 == 0) {
            handoff.push(a.address);  // another thread frees it
          } else {
            mine.push_back(a.address);
          }
        } catch (const out_of_memory& e) {
          oom_errors++;
          if (std::string(e.what()).rfind("[memkit::allocate] out of memory", 0) != 0)
            fail(std::string("unclear error: ") + e.what());
        }
      } else if (r < 70) {
        if (!mine.empty()) {
          const std::size_t k = rng() % mine.size();
          const address_t a = mine[k];
          mine[k] = mine.back();
          mine.pop_back();
          release(a);
        }
      } else if (r < 90) {
        if (const address_t a = handoff.pop()) release(a);
      } else {
        device.submit(queue);
      }
    }
    for (address_t a : mine) handoff.push(a);
  };

  auto controller = [&] {
    std::mt19937_64 rng(7);
    while (!done.load()) {
      const std::uint64_t r = rng() % 10;
      if (r < 3) {
        alloc.set_memory_limit((32 + rng() % 160) * MiB);
      } else if (r < 5) {
        alloc.set_cache_limit((rng() % 64) * MiB);
      } else if (r < 6) {
        alloc.clear_cache();
      } else if (r < 7) {
        alloc.reset_peak();
      } else {
        const auto q = static_cast<queue_id>(rng() % o.queue_count);
        device.complete(q, device.get_submitted(q));
      }
      std::this_thread::yield();
    }
  };

  std::thread control(controller);
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < config.threads; ++t) workers.emplace_back(worker, t);
  for (std::thread& w : workers) w.join();
  done = true;
  control.join();

  for (const std::string& f : failures) ADD_FAILURE() << f;
  ASSERT_TRUE(failures.empty());

  // Every byte accounted for: the counters, a recount and the registry agree.
  const std::map<address_t, std::size_t> live = registry.get_blocks();
  std::size_t live_bytes = 0;
  for (const auto& [a, size] : live) {
    live_bytes += size;
    EXPECT_EQ(alloc.get_size(a), size);
  }
  ASSERT_NO_THROW(alloc.validate());
  const statistics s = alloc.get_statistics();
  EXPECT_EQ(alloc.calculate_statistics(), s);
  EXPECT_EQ(s.active_bytes, live_bytes);
  EXPECT_EQ(s.live_blocks, live.size());
  EXPECT_EQ(s.allocations, allocations.load());
  EXPECT_EQ(s.frees, frees.load());
  EXPECT_EQ(s.out_of_memory, oom_errors.load());
  EXPECT_EQ(s.reserved_bytes,
            device.get_counters().reserved_bytes + device.get_counters().page_bytes);
  EXPECT_GT(allocations.load(), config.threads * config.calls_per_thread / 4);

  while (const address_t a = handoff.pop()) release(a);
  faults.set_completion_lag(0, false);
  device.complete_all();
  alloc.clear_cache();
  const statistics end = alloc.get_statistics();
  EXPECT_EQ(end.active_bytes, 0u);
  EXPECT_EQ(end.live_blocks, 0u);
  for (const segment_view& v : alloc.calculate_segments()) {
    EXPECT_TRUE(
        std::none_of(v.blocks.begin(), v.blocks.end(), [](const block_view& b) { return b.live; }));
  }
  EXPECT_EQ(end.reserved_bytes, 0u) << "free segments stayed reserved after clear_cache";
  EXPECT_EQ(device.get_counters().reserved_bytes + device.get_counters().page_bytes, 0u)
      << "the device holds what the allocator does not count";
  EXPECT_EQ(device.get_counters().mapped_bytes, 0u);
  EXPECT_EQ(alloc.calculate_statistics(), end);
  if (config.fault_rate > 0) {
    EXPECT_GT(faults.get_counters().segment_faults, 0u);
  }
  if (config.page_fault_rate > 0) {
    EXPECT_GT(faults.get_counters().vm_faults, 0u);
  }
  // Frees pending on other queues were reused by ordering (allocator_options::order_queues).
  EXPECT_GT(s.queue_orders, 0u);
}

TEST(concurrency_stress, threads_on_four_queues_lose_no_byte) { run_stress({}); }

TEST(concurrency_stress, with_segment_faults_and_late_fences) {
  run_stress({.threads = 6, .calls_per_thread = 2500, .fault_rate = 0.2, .completion_lag = 3});
}

// The small pool's segments on arena pages, beside slow unmaps and failing page calls:
// a small segment that waits on a page another thread unmaps, or fails to map, places
// itself again, and every operation's invariants hold meanwhile.
TEST(concurrency_stress, small_segments_in_the_arena_with_slow_unmaps_and_failing_maps) {
  run_stress({.threads = 6,
              .calls_per_thread = 2500,
              .page_fault_rate = 0.05,
              .unmap_delay_us = 40,
              .small_segments_in_arena = true});
}

// Pages the arena takes away (stolen for another block, or released) are unmapped
// with the lock released; a slow unmap must not let another thread map a page at
// the same address meanwhile (the device refuses it, or unmaps the new page).
TEST(concurrency_stress, slow_unmaps_never_overlap_a_new_mapping) {
  sim_options o;
  o.capacity = std::size_t{1} << 30;
  sim_backend device(o);
  fault_injection_options fo;
  fo.unmap_delay_us = 300;
  fault_injection_adaptor faults(device, fo);
  allocator_options settings;
  settings.arena_slack = 0.0;
  settings.validate = true;
  allocator alloc(faults, settings);
  std::atomic<std::uint64_t> oom_errors{0};
  auto worker = [&](unsigned t) {
    std::mt19937_64 rng(t);
    std::vector<address_t> mine;
    for (int i = 0; i < 400; ++i) {
      if (mine.size() < 6 && rng() % 3 != 0) {
        try {
          mine.push_back(alloc.allocate(MiB + rng() % (6 * MiB)).address);
        } catch (const out_of_memory&) {
          oom_errors++;
        }
      } else if (!mine.empty()) {
        const std::size_t k = rng() % mine.size();
        alloc.free(mine[k]);
        mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(k));
      }
      // Now and then the cache goes: idle pages are released (unmapped) too.
      if (t == 0 && i % 50 == 0) alloc.clear_cache();
    }
    for (address_t a : mine) alloc.free(a);
  };
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < 6; ++t) workers.emplace_back(worker, t);
  for (std::thread& w : workers) w.join();
  EXPECT_EQ(faults.get_counters().upstream_failures, 0u);
  EXPECT_EQ(oom_errors.load(), 0u);
  const statistics s = alloc.get_statistics();
  EXPECT_GT(s.unmaps, 0u);
  EXPECT_GT(s.moves, 0u) << "pages moved, leaving shadows that later unmaps and mappings meet";
  alloc.clear_cache();
  EXPECT_EQ(device.get_counters().mapped_bytes, 0u);
}

}  // namespace
}  // namespace memkit

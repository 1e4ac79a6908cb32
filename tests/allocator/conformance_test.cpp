// The conformance suite: public behaviours every backend must show.
#include <random>
#include <thread>
#include <vector>

#include "backend_fixtures.hpp"

namespace memkit {
namespace {

template <class Fixture>
class conformance : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = Fixture::get_skip_reason(); !why.empty()) GTEST_SKIP() << why;
    device_ = Fixture::make();
    allocator_ = std::make_unique<allocator>(
        *device_, allocator_options{.policy = Fixture::policy,
                                    .validate = true,
                                    .small_segments_in_arena = Fixture::small_segments_in_arena});
  }
  static constexpr bool segments = Fixture::policy == pool_policy::segments;
  std::unique_ptr<backend> device_;
  std::unique_ptr<allocator> allocator_;
};

TYPED_TEST_SUITE(conformance, testing::all_backends, testing::backend_names);

TYPED_TEST(conformance, zero_bytes_is_valid_and_costs_nothing) {
  const allocation a = this->allocator_->allocate(0);
  EXPECT_EQ(a.address, 0u);
  EXPECT_EQ(a.size, 0u);
  this->allocator_->free(a.address);
  EXPECT_EQ(this->allocator_->get_statistics(), statistics{});
}

TYPED_TEST(conformance, request_above_largest_buffer_names_both_sizes) {
  const std::size_t max = this->device_->get_facts().max_buffer;
  try {
    this->allocator_->allocate(max + 1);
    FAIL() << "expected invalid_argument";
  } catch (const invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("[memkit::allocate]"), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(max + 1)), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(max)), std::string::npos) << what;
  }
  EXPECT_EQ(this->allocator_->get_statistics(), statistics{});
}

TYPED_TEST(conformance, cache_limit_zero_leaves_no_cache_after_free) {
  this->allocator_->set_cache_limit(0);
  const allocation a = this->allocator_->allocate(std::size_t{5} << 20);
  this->allocator_->free(a.address);
  EXPECT_EQ(this->allocator_->get_statistics().cached_bytes, 0u);
  EXPECT_EQ(this->allocator_->get_statistics().reserved_bytes, 0u);
}

TYPED_TEST(conformance, setters_return_the_previous_value) {
  const std::size_t memory = this->allocator_->get_memory_limit();
  EXPECT_EQ(memory, this->device_->get_facts().capacity);
  EXPECT_EQ(this->allocator_->set_memory_limit(100 << 20), memory);
  EXPECT_EQ(this->allocator_->set_memory_limit(200 << 20), std::size_t{100} << 20);
  const std::size_t cache = this->allocator_->get_cache_limit();
  EXPECT_EQ(this->allocator_->set_cache_limit(1 << 20), cache);
  EXPECT_EQ(this->allocator_->set_cache_limit(2 << 20), std::size_t{1} << 20);
  EXPECT_EQ(this->allocator_->set_wired_limit(4096), 0u);
  EXPECT_EQ(this->allocator_->set_wired_limit(8192), 4096u);
}

TYPED_TEST(conformance, wired_limit_above_the_backend_maximum_is_an_error) {
  const std::size_t max = this->device_->get_facts().max_wired;
  EXPECT_THROW(this->allocator_->set_wired_limit(max + 1), invalid_argument);
  EXPECT_EQ(this->allocator_->get_wired_limit(), 0u);
}

TYPED_TEST(conformance, active_returns_to_start_after_all_frees) {
  std::mt19937_64 rng(1);
  const std::size_t start = this->allocator_->get_statistics().active_bytes;
  std::vector<allocation> live;
  for (int i = 0; i < 300; ++i) live.push_back(this->allocator_->allocate(1 + rng() % (3 << 20)));
  std::shuffle(live.begin(), live.end(), rng);
  for (const allocation& a : live) this->allocator_->free(a.address);
  EXPECT_EQ(this->allocator_->get_statistics().active_bytes, start);
  EXPECT_EQ(this->allocator_->get_statistics().requested_bytes, 0u);
  EXPECT_EQ(this->allocator_->calculate_statistics(), this->allocator_->get_statistics());
}

TYPED_TEST(conformance, peak_survives_frees_and_reset_peak_zeroes_it) {
  const allocation a = this->allocator_->allocate(3 << 20);
  const allocation b = this->allocator_->allocate(1 << 20);
  const std::size_t peak = this->allocator_->get_statistics().peak_active_bytes;
  EXPECT_EQ(peak, a.size + b.size);
  this->allocator_->free(a.address);
  this->allocator_->free(b.address);
  EXPECT_EQ(this->allocator_->get_statistics().peak_active_bytes, peak);
  this->allocator_->reset_peak();
  EXPECT_EQ(this->allocator_->get_statistics().peak_active_bytes, 0u);
  EXPECT_EQ(this->allocator_->get_statistics().peak_requested_bytes, 0u);
}

TYPED_TEST(conformance, clear_cache_leaves_the_cache_empty) {
  std::vector<allocation> live;
  for (std::size_t bytes : {1000u, 70000u, 3u << 20, 12u << 20}) {
    live.push_back(this->allocator_->allocate(bytes));
  }
  for (const allocation& a : live) this->allocator_->free(a.address);
  EXPECT_GT(this->allocator_->get_statistics().cached_bytes, 0u);
  this->allocator_->clear_cache();
  EXPECT_EQ(this->allocator_->get_statistics().cached_bytes, 0u);
  EXPECT_EQ(this->allocator_->get_statistics().reserved_bytes, 0u);
}

TYPED_TEST(conformance, cached_8k_block_serves_6k_and_reports_real_size) {
  const allocation a = this->allocator_->allocate(8192);
  const allocation pin = this->allocator_->allocate(512);  // keeps the 8 KiB block apart
  this->allocator_->free(a.address);
  const statistics before = this->allocator_->get_statistics();
  const allocation b = this->allocator_->allocate(6000);
  EXPECT_EQ(b.address, a.address);
  EXPECT_EQ(b.size, 8192u);
  EXPECT_EQ(this->allocator_->get_size(b.address), 8192u);
  const statistics after = this->allocator_->get_statistics();
  EXPECT_EQ(after.cache_hits, before.cache_hits + 1);
  EXPECT_EQ(after.backend_allocations, before.backend_allocations);
  EXPECT_EQ(after.active_bytes, before.active_bytes + 8192);
  EXPECT_EQ(after.requested_bytes, before.requested_bytes + 6000);
  this->allocator_->free(b.address);
  this->allocator_->free(pin.address);
}

TYPED_TEST(conformance, reuse_wastes_a_bounded_amount) {
  // The bound of allocator.hpp: large blocks are split exactly; small ones waste
  // less than min(request / 2, 4 KiB) beyond the 512-byte rounding.
  std::mt19937_64 rng(7);
  std::vector<allocation> live;
  std::vector<std::size_t> asked;
  for (int i = 0; i < 2000; ++i) {
    if (!live.empty() && rng() % 2) {
      const std::size_t k = rng() % live.size();
      this->allocator_->free(live[k].address);
      live[k] = live.back();
      live.pop_back();
      asked[k] = asked.back();
      asked.pop_back();
      continue;
    }
    const std::size_t bytes = 1 + rng() % (rng() % 4 ? 1 << 20 : 8 << 20);
    const allocation a = this->allocator_->allocate(bytes);
    const std::size_t rounded = (bytes + 511) / 512 * 512;
    ASSERT_GE(a.size, bytes);
    if (rounded > (1u << 20)) {
      EXPECT_EQ(a.size, rounded) << bytes;
    } else {
      EXPECT_LT(a.size - rounded,
                std::max<std::size_t>(512, std::min<std::size_t>(rounded / 2, 4096)))
          << bytes;
    }
    live.push_back(a);
    asked.push_back(bytes);
  }
  for (const allocation& a : live) this->allocator_->free(a.address);
}

TYPED_TEST(conformance, freed_neighbours_coalesce) {
  const allocation a = this->allocator_->allocate(4 << 20);
  this->allocator_->free(a.address);
  const std::uint64_t backend_calls = this->allocator_->get_statistics().backend_allocations;
  // a's memory now serves two 2 MiB blocks side by side ...
  const allocation b = this->allocator_->allocate(2 << 20);
  const allocation c = this->allocator_->allocate(2 << 20);
  EXPECT_EQ(this->allocator_->get_statistics().backend_allocations, backend_calls);
  EXPECT_EQ(b.address, a.address);
  EXPECT_EQ(c.address, a.address + (2 << 20));
  this->allocator_->free(b.address);
  this->allocator_->free(c.address);
  if (this->segments) {
    EXPECT_EQ(this->allocator_->calculate_largest_free_block(), std::size_t{4} << 20);
  }
  // ... and, merged again, the whole of it.
  const allocation d = this->allocator_->allocate(4 << 20);
  EXPECT_EQ(d.address, a.address);
  EXPECT_EQ(this->allocator_->get_statistics().backend_allocations, backend_calls);
  this->allocator_->free(d.address);
}

TYPED_TEST(conformance, out_of_memory_changes_nothing_and_says_why) {
  this->allocator_->set_memory_limit(64 << 20);
  const allocation a = this->allocator_->allocate(40 << 20);
  const allocation b = this->allocator_->allocate(1 << 20);
  this->allocator_->free(b.address);
  const statistics before = this->allocator_->get_statistics();
  const auto segments_before = this->allocator_->calculate_segments();
  try {
    this->allocator_->allocate(30 << 20);
    FAIL() << "expected out_of_memory";
  } catch (const out_of_memory& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("[memkit::allocate]"), std::string::npos);
    EXPECT_NE(what.find(std::to_string(30 << 20)), std::string::npos) << what;
    EXPECT_EQ(e.get_details().requested_bytes, std::size_t{30} << 20);
    EXPECT_EQ(e.get_details().active_bytes, before.active_bytes);
    EXPECT_EQ(e.get_details().reserved_bytes, before.reserved_bytes);
    EXPECT_EQ(e.get_details().limit_bytes, std::size_t{64} << 20);
  }
  statistics after = this->allocator_->get_statistics();
  EXPECT_EQ(after.out_of_memory, before.out_of_memory + 1);
  after.out_of_memory = before.out_of_memory;
  EXPECT_EQ(after, before);
  EXPECT_EQ(this->allocator_->calculate_segments().size(), segments_before.size());
  this->allocator_->free(a.address);
  // Memory allows it now: the same request succeeds.
  const allocation c = this->allocator_->allocate(30 << 20);
  this->allocator_->free(c.address);
}

TYPED_TEST(conformance, pressure_releases_the_cache_before_failing) {
  this->allocator_->set_memory_limit(64 << 20);
  const allocation a = this->allocator_->allocate(40 << 20);
  const allocation pin =
      this->allocator_->allocate(2 << 20);  // keeps a's memory from growing in place
  this->allocator_->free(a.address);        // cached
  const allocation b = this->allocator_->allocate(50 << 20);
  const statistics s = this->allocator_->get_statistics();
  EXPECT_LE(s.peak_reserved_bytes, std::size_t{64} << 20);
  EXPECT_GT(s.backend_frees + s.unmaps + s.moves, 0u) << "a's cached memory was given up or moved";
  this->allocator_->free(b.address);
  this->allocator_->free(pin.address);
}

TYPED_TEST(conformance, cache_limit_releases_least_recently_used_first) {
  const allocation a = this->allocator_->allocate(4 << 20);
  const allocation pin1 = this->allocator_->allocate(2 << 20);
  const allocation b = this->allocator_->allocate(6 << 20);
  const allocation pin2 = this->allocator_->allocate(2 << 20);
  const allocation c = this->allocator_->allocate(8 << 20);
  this->allocator_->free(a.address);
  this->allocator_->free(b.address);
  this->allocator_->free(c.address);
  const std::size_t pins = pin1.size + pin2.size;
  this->allocator_->set_cache_limit(std::size_t{14} << 20);  // a goes: it was freed first
  EXPECT_EQ(this->allocator_->get_statistics().cached_bytes, std::size_t{14} << 20);
  EXPECT_EQ(this->allocator_->get_statistics().reserved_bytes, pins + (std::size_t{14} << 20));
  // b and c are still cached: allocating them again costs no backend call.
  const std::uint64_t calls = this->allocator_->get_statistics().backend_allocations;
  const allocation b2 = this->allocator_->allocate(6 << 20);
  const allocation c2 = this->allocator_->allocate(8 << 20);
  EXPECT_EQ(this->allocator_->get_statistics().backend_allocations, calls);
  EXPECT_EQ(b2.address, b.address);
  EXPECT_EQ(c2.address, c.address);
  for (const allocation& x : {b2, c2, pin1, pin2}) this->allocator_->free(x.address);
}

// The snapshot's live blocks are what the program holds: small blocks parked in this
// thread's cache after their free are not among them (torch.cuda.memory_snapshot
// users add them up against memory_allocated()).
TYPED_TEST(conformance, snapshot_live_blocks_add_up_to_active_bytes) {
  std::vector<allocation> kept;
  for (int i = 0; i < 8; ++i) {
    kept.push_back(this->allocator_->allocate(std::size_t{4096} << (i % 3)));
    this->allocator_->free(this->allocator_->allocate(std::size_t{8192} << (i % 3)).address);
  }
  kept.push_back(this->allocator_->allocate(std::size_t{3} << 20));
  // Beside an arena, held back in this thread's cache until its next call.
  this->allocator_->free(this->allocator_->allocate(std::size_t{1} << 20).address);
  std::size_t live = 0, requested = 0;
  for (const segment_view& v : this->allocator_->calculate_segments()) {
    for (const block_view& b : v.blocks) {
      live += b.live ? b.size : 0;
      requested += b.live ? b.requested : 0;
    }
  }
  const statistics s = this->allocator_->get_statistics();
  EXPECT_EQ(live, s.active_bytes);
  EXPECT_EQ(requested, s.requested_bytes);
  for (const allocation& a : kept) this->allocator_->free(a.address);
}

TYPED_TEST(conformance, unknown_free_is_an_error_that_changes_nothing) {
  const allocation a = this->allocator_->allocate(1000);
  const statistics before = this->allocator_->get_statistics();
  EXPECT_THROW(this->allocator_->free(a.address + 512), invalid_argument);
  this->allocator_->free(a.address);
  EXPECT_THROW(this->allocator_->free(a.address), invalid_argument);
  EXPECT_EQ(before.live_blocks, 1u);
}

// The free of one block and a request of its size, the pair a loop repeats: the
// request gets the block back (from the thread's cache, without the lock), and the
// counters in between are exact.
TYPED_TEST(conformance, a_freed_block_is_taken_back_by_a_request_of_its_size) {
  const allocation pin = this->allocator_->allocate(1024);
  for (const std::size_t bytes :
       {std::size_t{768} << 10, std::size_t{1} << 20, std::size_t{4096}}) {
    const allocation a = this->allocator_->allocate(bytes);
    const statistics before = this->allocator_->get_statistics();
    this->allocator_->free(a.address);
    const statistics freed = this->allocator_->get_statistics();
    EXPECT_EQ(freed.active_bytes, before.active_bytes - a.size);
    EXPECT_EQ(freed.requested_bytes, before.requested_bytes - bytes);
    EXPECT_EQ(freed.frees, before.frees + 1);
    EXPECT_EQ(freed.live_blocks, before.live_blocks - 1);
    const allocation again = this->allocator_->allocate(bytes);
    EXPECT_EQ(again.address, a.address) << bytes << " bytes";
    EXPECT_EQ(this->allocator_->get_statistics().active_bytes, before.active_bytes);
    EXPECT_EQ(this->allocator_->calculate_statistics(), this->allocator_->get_statistics());
    this->allocator_->free(again.address);
  }
  this->allocator_->free(pin.address);
  // Every block freed, the last one possibly held in this thread's cache: all of it
  // goes back.
  this->allocator_->clear_cache();
  EXPECT_EQ(this->allocator_->get_statistics().reserved_bytes, 0u);
  EXPECT_EQ(this->allocator_->calculate_statistics(), this->allocator_->get_statistics());
}

// The peaks stay bounded when freed blocks a thread's cache holds are given up for
// requests of another size, however often: a loop that alternates two sizes never
// has more than one block live. (The peaks may count one parked block as live too:
// an upper bound, thread_cache.hpp; never more.)
TYPED_TEST(conformance, peaks_stay_bounded_when_freed_blocks_are_given_up) {
  this->allocator_->reset_peak();
  for (int i = 0; i < 64; ++i) {
    const std::size_t bytes = i % 2 ? std::size_t{800} << 10 : std::size_t{1} << 20;
    this->allocator_->free(this->allocator_->allocate(bytes).address);
  }
  const statistics s = this->allocator_->get_statistics();
  EXPECT_LE(s.peak_requested_bytes, std::size_t{2} << 20);
  EXPECT_LE(s.peak_requested_bytes, s.peak_active_bytes);
  EXPECT_EQ(this->allocator_->calculate_statistics(), s);
}

// A block a thread's cache hands out for a smaller request, freed on another thread:
// the counters and their peaks stay exact, however often.
TYPED_TEST(conformance, a_cached_block_freed_on_another_thread_keeps_requested_bytes_exact) {
  this->allocator_->reset_peak();
  for (int i = 0; i < 100; ++i) {
    this->allocator_->free(this->allocator_->allocate(4096).address);
    const allocation b = this->allocator_->allocate(3000);  // the same block, if cached
    std::thread([&] { this->allocator_->free(b.address); }).join();
    ASSERT_EQ(this->allocator_->get_statistics().requested_bytes, 0u) << "after " << i;
  }
  const statistics s = this->allocator_->get_statistics();
  EXPECT_LE(s.peak_requested_bytes, std::size_t{8192});
  EXPECT_EQ(this->allocator_->calculate_statistics(), s);
}

// A free that fails leaves the counters as they were, also right after a free that
// a thread cache holds.
TYPED_TEST(conformance, a_failed_free_after_a_free_changes_no_statistics) {
  const allocation a = this->allocator_->allocate(std::size_t{1} << 20);
  const allocation b = this->allocator_->allocate(std::size_t{1} << 20);
  this->allocator_->free(a.address);
  const statistics before = this->allocator_->get_statistics();
  EXPECT_THROW(this->allocator_->free(b.address + 512), invalid_argument);
  EXPECT_EQ(this->allocator_->get_statistics(), before);
  EXPECT_EQ(this->allocator_->calculate_statistics(), before);
  this->allocator_->free(b.address);
}

// What a thread's cache holds goes back when the thread ends.
TYPED_TEST(conformance, a_thread_that_ends_gives_back_what_its_cache_holds) {
  std::thread([&] {
    const allocation a = this->allocator_->allocate(std::size_t{1} << 20);
    const allocation b = this->allocator_->allocate(4096);
    this->allocator_->free(b.address);
    this->allocator_->free(a.address);
  }).join();
  EXPECT_EQ(this->allocator_->calculate_statistics(), this->allocator_->get_statistics());
  EXPECT_EQ(this->allocator_->get_statistics().active_bytes, 0u);
  this->allocator_->clear_cache();
  EXPECT_EQ(this->allocator_->get_statistics().reserved_bytes, 0u);
}

TYPED_TEST(conformance, statistics_recount_matches_under_random_operations) {
  std::mt19937_64 rng(3);
  std::vector<allocation> live;
  for (int i = 0; i < 3000; ++i) {
    const int op = static_cast<int>(rng() % 10);
    if (op < 5 || live.empty()) {
      live.push_back(this->allocator_->allocate(1 + rng() % (rng() % 8 ? 65536 : 16 << 20),
                                                static_cast<queue_id>(rng() % 2)));
    } else if (op < 9) {
      const std::size_t k = rng() % live.size();
      this->allocator_->free(live[k].address);
      live[k] = live.back();
      live.pop_back();
    } else if (rng() % 4 == 0) {
      this->allocator_->clear_cache();
    } else {
      this->allocator_->set_cache_limit(rng() % (64 << 20));
    }
  }
  EXPECT_EQ(this->allocator_->calculate_statistics(), this->allocator_->get_statistics());
  for (const allocation& a : live) this->allocator_->free(a.address);
}

TYPED_TEST(conformance, threads_allocating_and_freeing_account_for_every_byte) {
  std::vector<std::thread> threads;
  std::vector<std::vector<allocation>> handoff(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(t));
      for (int i = 0; i < 2000; ++i) {
        // Mostly small blocks, one in eight up to 1.5 MiB (beside an arena, those up
        // to 1 MiB are held back by the thread's cache for its next call).
        const std::size_t bytes = 1 + rng() % (rng() % 8 ? 200000 : 1536 << 10);
        handoff[t].push_back(this->allocator_->allocate(bytes, static_cast<queue_id>(t % 2)));
        if (handoff[t].size() > 32) {
          this->allocator_->free(handoff[t].front().address);
          handoff[t].erase(handoff[t].begin());
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  // Free on other threads than the allocating ones.
  threads.clear();
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (const allocation& a : handoff[(t + 1) % 4]) this->allocator_->free(a.address);
    });
  }
  for (auto& th : threads) th.join();
  // Other threads' caches flushed meanwhile too (clear_cache takes theirs).
  this->allocator_->clear_cache();
  const statistics s = this->allocator_->calculate_statistics();
  EXPECT_EQ(s.active_bytes, 0u);
  EXPECT_EQ(s.live_blocks, 0u);
  EXPECT_EQ(s.allocations, 8000u);
  EXPECT_EQ(s.frees, 8000u);
}

}  // namespace
}  // namespace memkit

// Recording: what an allocator was asked, as a memkit trace that replay reads back
// in the same order, sizes and queues, on every policy and with thread caches.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "memkit/memkit.hpp"
#include "memkit/replay.hpp"
#include "memkit/trace.hpp"

namespace memkit {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

std::string temporary_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("memkit_recorder_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

class recorder_test : public ::testing::TestWithParam<pool_policy> {};

TEST_P(recorder_test, replay_reads_back_what_was_asked) {
  sim_options o;
  o.queue_count = 2;
  sim_backend device(o);
  const std::string path = temporary_path("calls.csv");
  allocator_options options;
  options.policy = GetParam();
  options.validate = true;
  options.record_path = path;
  struct call {
    bool allocate;
    std::size_t bytes;
    queue_id queue;
  };
  std::vector<call> calls;
  {
    allocator a(device, options);
    std::vector<address_t> live;
    // Small (thread-cache hits after the first round), large (arena or segments),
    // on two queues; zero bytes records nothing.
    for (int round = 0; round < 3; ++round) {
      for (const std::size_t bytes :
           {std::size_t{100}, 3 * kMiB + 7, std::size_t{4096}, 40 * kMiB}) {
        const queue_id queue = bytes > kMiB ? 1 : 0;
        live.push_back(a.allocate(bytes, queue).address);
        calls.push_back({true, bytes, queue});
      }
      EXPECT_EQ(a.allocate(0).address, 0u);
      for (std::size_t k = 0; k + 1 < live.size(); k += 2) {
        a.free(live[k]);
        calls.push_back({false, 0, 0});
      }
      std::erase_if(live, [&, k = std::size_t{0}](address_t) mutable { return k++ % 2 == 0; });
    }
    EXPECT_EQ(a.stop_recording(), calls.size());
    a.free(live.front());  // after the stop: not recorded
  }
  const trace::trace_data t = trace::read(path);
  ASSERT_EQ(t.events.size(), calls.size());
  for (std::size_t k = 0; k < calls.size(); ++k) {
    EXPECT_EQ(t.events[k].kind == trace::action::allocate, calls[k].allocate) << k;
    if (calls[k].allocate) {
      EXPECT_EQ(t.events[k].size, calls[k].bytes) << k;
      EXPECT_EQ(t.streams[t.events[k].stream], std::to_string(calls[k].queue)) << k;
    }
  }
  const trace::replay_result replayed = trace::replay(t, {});
  EXPECT_TRUE(replayed.completed);
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(policies, recorder_test,
                         ::testing::Values(pool_policy::segments, pool_policy::arena),
                         [](const auto& param_info) {
                           return param_info.param == pool_policy::arena ? "arena" : "segments";
                         });

TEST(recorder, blocks_live_before_the_start_are_left_out_with_their_frees) {
  sim_backend device;
  allocator a(device);
  const address_t before = a.allocate(5 * kMiB).address;
  const std::string path = temporary_path("late.csv");
  a.start_recording(path);
  const address_t during = a.allocate(7 * kMiB).address;
  a.free(before);
  a.free(during);
  EXPECT_EQ(a.stop_recording(), 2u);
  const trace::trace_data t = trace::read(path);
  ASSERT_EQ(t.events.size(), 2u);
  EXPECT_EQ(t.events[0].size, 7 * kMiB);
  std::filesystem::remove(path);
}

TEST(recorder, a_path_that_cannot_be_opened_is_named_and_changes_nothing) {
  sim_backend device;
  allocator a(device);
  const std::string good = temporary_path("good.csv");
  a.start_recording(good);
  const address_t block = a.allocate(kMiB).address;
  try {
    a.start_recording("/nonexistent-dir/calls.csv");
    FAIL() << "no error";
  } catch (const invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/calls.csv: cannot open"),
              std::string::npos)
        << e.what();
  }
  a.free(block);  // still recorded to the first file
  EXPECT_EQ(a.stop_recording(), 2u);
  EXPECT_EQ(a.stop_recording(), 0u);  // none under way
  std::filesystem::remove(good);
}

TEST(recorder, threads_record_every_call) {
  sim_backend device;
  allocator a(device);
  const std::string path = temporary_path("threads.csv");
  a.start_recording(path);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&a, t] {
      for (int i = 0; i < 500; ++i) a.free(a.allocate(256 + 64 * ((i + t) % 7)).address);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(a.stop_recording(), 4u * 500u * 2u);
  const trace::trace_data t = trace::read(path);  // every free follows its allocation
  EXPECT_EQ(t.allocations, 2000u);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace memkit

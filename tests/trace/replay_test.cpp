// The replay engine: peak live from the trace, statistics from the allocator, and the
// minimum-capacity bisection.
#include "memkit/replay.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "memkit/report_html.hpp"
#include "memkit/trace.hpp"

namespace memkit::trace {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

// A synthetic trace: a sliding window of live blocks of random sizes on two streams.
trace_data synthetic_trace(std::uint32_t seed, int allocations) {
  std::mt19937 random(seed);
  std::uniform_int_distribution<std::size_t> size(1, 24 * kMiB);
  std::string text = "# workload: synthetic\n";
  std::vector<int> live;
  for (int id = 0; id < allocations; ++id) {
    text += "a," + std::to_string(id) + "," + std::to_string(size(random)) + "," +
            std::to_string(id % 3 == 0 ? 1 : 0) + "\n";
    live.push_back(id);
    if (live.size() > 40) {
      const std::size_t victim = random() % live.size();
      text += "f," + std::to_string(live[victim]) + "\n";
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(victim));
    }
  }
  return parse(text, "synthetic.csv");
}

// The device lag counts events over every stream: a side stream's little work completes
// `lag` events after it was issued, as on a device, not after `lag` more of its own.
TEST(trace_replay, device_lag_counts_the_events_of_every_stream) {
  std::string text = "a,0,33554432,1\nf,0\n";  // 16 pages on a side stream, freed
  for (int k = 1; k <= 20; ++k) text += "a," + std::to_string(k) + ",4096,0\n";
  text += "a,100,33554432,0\n";  // the same size on the main stream
  const trace_data trace = parse(text, "side.csv");
  replay_options soon;
  soon.device_lag = 8;
  soon.order_queues = false;
  replay_options late = soon;
  late.device_lag = 1000;
  replay_options ordered = late;
  ordered.order_queues = true;  // the default
  const replay_result reused = replay(trace, soon);
  const replay_result grown = replay(trace, late);
  const replay_result reordered = replay(trace, ordered);
  ASSERT_TRUE(reused.completed && grown.completed && reordered.completed);
  EXPECT_LT(reused.peak_reserved_bytes, 40 * kMiB)
      << "the side stream's free completed 8 events later: its pages serve the main stream";
  EXPECT_GE(grown.peak_reserved_bytes, 64 * kMiB) << "still in flight: new pages";
  EXPECT_LT(reordered.peak_reserved_bytes, 40 * kMiB)
      << "still in flight, but the main stream waits for it on the device";
  EXPECT_EQ(reordered.final_statistics.queue_orders, 1u);
}

TEST(trace_replay, peak_live_of_a_small_trace) {
  const trace_data trace =
      parse("a,0,1000,0\na,1,3000,0\nf,0\na,2,500,1\nf,1\na,3,100,0\n", "small.csv");
  const replay_result result = replay(trace, {});
  EXPECT_TRUE(result.completed);
  EXPECT_EQ(result.events, 6u);
  EXPECT_EQ(result.allocations, 4u);
  EXPECT_EQ(result.peak_live_bytes, 4000u);
  EXPECT_GE(result.peak_reserved_bytes, result.peak_active_bytes);
  EXPECT_GE(result.peak_active_bytes, result.peak_live_bytes);
  EXPECT_GE(result.backend_allocs, 1u);
  EXPECT_EQ(result.final_statistics.live_blocks, 2u);
}

TEST(trace_replay, zero_byte_allocations_replay) {
  const trace_data trace = parse("a,0,0,0\na,1,10,0\nf,0\nf,1\n", "zero.csv");
  const replay_result result = replay(trace, {});
  EXPECT_TRUE(result.completed);
  EXPECT_EQ(result.peak_live_bytes, 10u);
}

TEST(trace_replay, too_small_a_capacity_runs_out_of_memory_naming_the_line) {
  const trace_data trace = parse("a,0,3145728,0\na,1,3145728,0\n", "two.csv");
  replay_options options;
  options.capacity = 4 * kMiB;
  const replay_result result = replay(trace, options);
  EXPECT_FALSE(result.completed);
  EXPECT_EQ(result.failed_line, 2u);
  EXPECT_EQ(result.events, 1u);
  EXPECT_FALSE(result.failure.empty());
}

// A block larger than the device: the device is too small, as for any out-of-memory
// (the command exits 2 with its report), not bad input.
TEST(trace_replay, block_above_the_largest_buffer_is_an_out_of_memory) {
  const trace_data trace = parse("a,0,1024,0\na,1,17179869184,0\n", "huge.csv");
  replay_options options;
  options.capacity = 8 * (std::size_t{1} << 30);
  const replay_result result = replay(trace, options);
  EXPECT_FALSE(result.completed);
  EXPECT_EQ(result.failed_line, 2u);
  EXPECT_NE(result.failure.find("larger than the device's largest buffer"), std::string::npos)
      << result.failure;
}

TEST(trace_replay, the_peak_breakdown_says_where_reserved_bytes_lie) {
  // 3 MiB and 2.5 MiB in the arena (pages 0-2, the second's last page half used), 4 KiB
  // in a small segment; the first block's free later sets no new peak.
  const trace_data trace =
      parse("a,0,3145728,0\na,1,4096,0\na,2,2621440,0\nf,0\na,3,1048576,0\n", "peak.csv");
  const peak_breakdown p = calculate_peak_breakdown(trace, {});
  EXPECT_EQ(p.line, 3u);
  EXPECT_EQ(p.step, 0u);
  EXPECT_EQ(p.live_bytes, 3145728u + 4096u + 2621440u);
  EXPECT_EQ(p.reserved_bytes, p.small_segment_bytes + p.other_bytes);
  EXPECT_EQ(p.other_bytes, p.other_block_bytes + p.partial_page_bytes + p.untouched_page_bytes);
  EXPECT_EQ(p.small_segment_bytes, 2 * kMiB);
  EXPECT_EQ(p.small_block_bytes, 4096u);
  EXPECT_EQ(p.other_bytes, 6 * kMiB);
  EXPECT_EQ(p.other_block_bytes, 3145728u + 2621440u);
  EXPECT_EQ(p.partial_page_bytes, kMiB / 2);
  EXPECT_EQ(p.untouched_page_bytes, 0u);
  EXPECT_EQ(p.reserved_bytes, replay(trace, {}).peak_reserved_bytes);
}

TEST(trace_replay, min_capacity_is_between_peak_live_and_peak_reserved_and_tight) {
  const trace_data trace = synthetic_trace(7, 400);
  const replay_result free_run = replay(trace, {});
  ASSERT_TRUE(free_run.completed);
  const min_capacity_result found =
      find_min_capacity(trace, {}, free_run.peak_live_bytes, free_run.peak_reserved_bytes);
  EXPECT_GE(found.min_capacity_bytes, free_run.peak_live_bytes);
  EXPECT_LE(found.min_capacity_bytes, (free_run.peak_reserved_bytes + kMiB - 1) / kMiB * kMiB);
  EXPECT_EQ(found.min_capacity_bytes % kMiB, 0u);
  EXPECT_EQ(found.failed_below_bytes + kMiB, found.min_capacity_bytes);

  replay_options at_minimum;
  at_minimum.capacity = found.min_capacity_bytes;
  EXPECT_TRUE(replay(trace, at_minimum).completed);
  replay_options below;
  below.capacity = found.min_capacity_bytes - kMiB;
  EXPECT_FALSE(replay(trace, below).completed);
}

TEST(trace_replay, defaults_are_the_allocators) {
  const replay_options replay_defaults;
  const allocator_options allocator_defaults;
  EXPECT_EQ(replay_defaults.arena_slack, allocator_defaults.arena_slack);
  EXPECT_EQ(replay_defaults.policy, allocator_defaults.policy);
  EXPECT_EQ(replay_defaults.validate, allocator_defaults.validate);
}

TEST(trace_replay, unmaps_after_the_warmup_are_those_after_its_marker) {
  // The same synthetic loop, with markers every 500 lines: the unmaps after the marker
  // that starts step 2 are the whole run's less those of the run that stops there.
  const trace_data plain = synthetic_trace(5, 2000);
  std::string marked = "# warmup_steps: 2\n";
  std::string prefix;
  std::uint64_t markers = 0;
  for (std::size_t i = 0; i < plain.events.size(); ++i) {
    const event& e = plain.events[i];
    if (i % 500 == 0) {
      marked += "s\n";
      ++markers;
    }
    const std::string line = e.kind == action::allocate
                                 ? "a," + std::to_string(e.block) + "," + std::to_string(e.size) +
                                       "," + plain.streams[e.stream] + "\n"
                                 : "f," + std::to_string(e.block) + "\n";
    marked += line;
    if (i < 1000) prefix += line;  // the events before the marker that starts step 2
  }
  replay_options floor;
  floor.arena_slack = 0;
  const trace_data with_markers = parse(marked, "marked.csv");
  ASSERT_EQ(with_markers.steps, markers);
  ASSERT_EQ(with_markers.warmup_steps, 2u);
  const replay_result whole = replay(with_markers, floor);
  const replay_result before = replay(parse(prefix, "prefix.csv"), floor);
  ASSERT_TRUE(whole.completed);
  EXPECT_EQ(whole.unmaps, replay(plain, floor).unmaps);  // markers change nothing
  ASSERT_TRUE(whole.has_unmaps_after_warmup);
  EXPECT_GT(whole.unmaps, before.unmaps);
  EXPECT_EQ(whole.unmaps_after_warmup, whole.unmaps - before.unmaps);
  // One figure a step, adding up to the whole and to what the prefix saw.
  ASSERT_EQ(whole.unmaps_by_step.size(), markers);
  EXPECT_EQ(whole.unmaps_by_step[0] + whole.unmaps_by_step[1], before.unmaps);
  std::uint64_t sum = 0;
  for (std::uint64_t u : whole.unmaps_by_step) sum += u;
  EXPECT_EQ(sum, whole.unmaps);

  // No step after the warmup (one marker, default warmup 1): no figure.
  const replay_result one = replay(parse("s\na,0,10,0\nf,0\n", "one.csv"), floor);
  EXPECT_FALSE(one.has_unmaps_after_warmup);
}

// A loop that empties the cache every step: each step's arena pages are made and
// given back again (segments: each step's segments), where without it the steps after
// the first reuse them; the modelled device time after the warm-up says what it costs.
TEST(trace_replay, emptying_the_cache_each_step_gives_back_and_remakes_the_pages) {
  std::string text = "# warmup_steps: 1\n";
  int id = 0;
  for (int step = 0; step < 4; ++step) {
    text += "s\n";
    const int first = id;
    for (int k = 0; k < 3; ++k) text += "a," + std::to_string(id++) + ",8388608,0\n";
    for (int k = first; k < id; ++k) text += "f," + std::to_string(k) + "\n";
  }
  const trace_data trace = parse(text, "steps.csv");
  replay_options kept;
  kept.policy = pool_policy::arena;
  replay_options emptied = kept;
  emptied.empty_cache_each_step = true;
  const replay_result reused = replay(trace, kept);
  const replay_result remade = replay(trace, emptied);
  ASSERT_TRUE(reused.completed && remade.completed && remade.has_unmaps_after_warmup);
  EXPECT_EQ(reused.maps_after_warmup, 0u) << "the first step's pages serve the others";
  EXPECT_EQ(reused.simulated_backend_ns_after_warmup, 0u);
  EXPECT_EQ(remade.maps_after_warmup, 3u * 12u) << "12 pages made again in each later step";
  EXPECT_EQ(remade.unmaps, 3u * 12u) << "and given back before it";
  EXPECT_GT(remade.simulated_backend_ns_after_warmup, 0u);
  EXPECT_EQ(remade.peak_reserved_bytes, reused.peak_reserved_bytes);
  // The recorded history (--html, --pytorch-snapshot) runs the same loop.
  const auto unmapped_bytes = [&](const replay_options& options) {
    std::size_t bytes = 0;
    for (const history_event& e : record_history(trace, options).entries) {
      if (e.kind == history_event::kinds::segment_unmap) bytes += e.size;
    }
    return bytes;
  };
  EXPECT_EQ(unmapped_bytes(kept), 0u);
  EXPECT_EQ(unmapped_bytes(emptied), 3u * 12u * 2u * kMiB);

  replay_options segments = emptied;
  segments.policy = pool_policy::segments;
  const replay_result segmented = replay(trace, segments);
  ASSERT_TRUE(segmented.completed);
  EXPECT_EQ(segmented.backend_frees, 3u * 3u) << "each step's three segments given back";
}

// Watching a replay changes nothing in it: small blocks park in the thread caches
// and new small segments are looked up while the run goes on.
TEST(trace_replay, an_observed_replay_is_the_replay) {
  std::mt19937 random(5);
  std::uniform_real_distribution<double> exponent(8.0, 23.0);  // 256 B .. 8 MiB
  std::string text;
  std::vector<int> live;
  for (int id = 0; id < 6000; ++id) {
    text += "a," + std::to_string(id) + "," +
            std::to_string(static_cast<std::size_t>(std::exp2(exponent(random)))) + ",0\n";
    live.push_back(id);
    while (live.size() > static_cast<std::size_t>(20 + (id / 500 % 3) * 60)) {
      const std::size_t victim = random() % live.size();
      text += "f," + std::to_string(live[victim]) + "\n";
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(victim));
    }
  }
  const trace_data trace = parse(text, "mixed.csv");
  const replay_observation observation = observe(trace, {});
  const replay_result result = replay(trace, {});
  ASSERT_TRUE(observation.completed);
  EXPECT_EQ(observation.peak_reserved_bytes, result.peak_reserved_bytes);
  std::uint64_t segments = 0, maps = 0, unmaps = 0;
  for (const history_event& e : observation.history.entries) {
    segments += e.kind == history_event::kinds::segment_alloc;
    maps += e.kind == history_event::kinds::segment_map ? e.size / (2 * kMiB) : 0;
    unmaps += e.kind == history_event::kinds::segment_unmap ? e.size / (2 * kMiB) : 0;
  }
  EXPECT_GT(segments, 1u) << "the small pool grew while the run went on";
  // The history holds the pages where they hold memory: a page mapped anew, moved
  // (mapped at its new place, its old one kept as a shadow) or moved back to a shadow
  // (no call) comes to hold memory at one place and stops at another.
  EXPECT_EQ(maps, result.maps + result.final_statistics.returns);
  EXPECT_GE(unmaps, result.final_statistics.moves + result.final_statistics.returns);
  EXPECT_GT(result.final_statistics.moves, 0u);
  EXPECT_EQ(observation.history.reserved, result.final_statistics.reserved_bytes);
}

TEST(trace_replay, observation_finds_the_peak_and_every_change_of_reserved) {
  const trace_data trace = synthetic_trace(11, 3000);
  const replay_observation observation = observe(trace, {});
  EXPECT_TRUE(observation.completed);
  EXPECT_EQ(observation.events, trace.events.size());
  const replay_result result = replay(trace, {});
  EXPECT_EQ(observation.peak_reserved_bytes, result.peak_reserved_bytes);
  // Reserved bytes change at increasing events, the first time to the peak at the peak.
  ASSERT_FALSE(observation.reserved_changes.empty());
  std::size_t highest = 0;
  for (std::size_t i = 0; i < observation.reserved_changes.size(); ++i) {
    const auto [event, bytes] = observation.reserved_changes[i];
    if (i > 0) {
      EXPECT_GT(event, observation.reserved_changes[i - 1].first);
    }
    if (bytes > highest) {
      highest = bytes;
      if (bytes == observation.peak_reserved_bytes) {
        EXPECT_EQ(event, observation.peak_event);
      }
    }
  }
  EXPECT_EQ(highest, observation.peak_reserved_bytes);
  EXPECT_EQ(observation.reserved_changes.back().second, observation.history.reserved);

  report_section section;
  section.trace = &trace;
  section.result = result;
  section.observation = observation;
  const std::string page = render_html({section});
  EXPECT_NE(page.find("id=\"timeline-0\""), std::string::npos);
  EXPECT_NE(page.find("id=\"segments-0\""), std::string::npos);
  EXPECT_EQ(page.find("http://"), page.find("http://www.w3.org/2000/svg"));  // no network
}

}  // namespace
}  // namespace memkit::trace

// Writers of traces: memkit's CSV read back to the same trace, the pickle writer's
// encodings, and the allocator's history that PyTorch snapshots are made of.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "memkit/pytorch_snapshot.hpp"
#include "memkit/replay.hpp"
#include "memkit/trace.hpp"
#include "memkit/write_csv.hpp"
#include "trace/pickle.hpp"

namespace memkit::trace {
namespace {

std::string fixture(const std::string& name) {
  return std::string(MEMKIT_SOURCE_DIR) + "/tests/data/traces/" + name;
}

void expect_same_trace(const trace_data& a, const trace_data& b) {
  ASSERT_EQ(a.events.size(), b.events.size());
  for (std::size_t i = 0; i < a.events.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(a.events[i].kind, b.events[i].kind);
    EXPECT_EQ(a.events[i].block, b.events[i].block);
    EXPECT_EQ(a.events[i].size, b.events[i].size);
    EXPECT_EQ(a.events[i].stream, b.events[i].stream);
  }
  EXPECT_EQ(a.streams, b.streams);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_EQ(a.step_starts, b.step_starts);
  EXPECT_EQ(a.stacks, b.stacks);
  EXPECT_EQ(a.block_stacks, b.block_stacks);
}

TEST(trace_write, memkit_csv_reads_back_to_the_same_trace) {
  for (const char* name : {"pytorch_snapshot.json", "small.trace.csv", "rmm_log.csv"}) {
    SCOPED_TRACE(name);
    const trace_data original = read(fixture(name));
    const trace_data again = parse(write_memkit_csv(original), "again.csv");
    expect_same_trace(original, again);
    EXPECT_EQ(again.source_format, format::memkit);
  }
  // Frames with the characters the format escapes, and markers around events.
  const trace_data odd = parse(
      "# workload: odd\ns\n@4,%20dir%2Cname%25.py,7,%0Af%20\na,9,10,x,@4\ns\nf,9\ns\n", "odd.csv");
  ASSERT_EQ(odd.stacks.size(), 1u);
  EXPECT_EQ(odd.stacks[0][0].filename, " dir,name%.py");
  EXPECT_EQ(odd.stacks[0][0].name, "\nf ");
  const std::string text = write_memkit_csv(odd);
  expect_same_trace(odd, parse(text, "odd-again.csv"));
  EXPECT_NE(text.find("@0,%20dir%2Cname%25.py,7,%0Af%20\na,0,10,x,@0\n"), std::string::npos)
      << text;
}

// Python's pickle.dumps of each value, without its PROTO / FRAME / STOP.
TEST(trace_write, pickle_integers_and_strings_as_python_writes_them) {
  const auto body = [](auto write) {
    pickle_writer out;
    write(out);
    const std::string pickle = out.finish();
    EXPECT_EQ(pickle.substr(0, 2), std::string("\x80\x04", 2));
    EXPECT_EQ(pickle.back(), '.');
    return pickle.substr(2, pickle.size() - 3);
  };
  const auto integer = [&](std::int64_t v) {
    return body([v](pickle_writer& p) { p.integer(v); });
  };
  EXPECT_EQ(integer(7), std::string("K\x07"));
  EXPECT_EQ(integer(256), std::string("M\x00\x01", 3));
  EXPECT_EQ(integer(65536), std::string("J\x00\x00\x01\x00", 5));
  EXPECT_EQ(integer(-1), std::string("J\xff\xff\xff\xff"));
  EXPECT_EQ(integer(std::int64_t{1} << 31), std::string("\x8a\x05\x00\x00\x00\x80\x00", 7));
  EXPECT_EQ(integer(std::int64_t{1} << 40), std::string("\x8a\x06\x00\x00\x00\x00\x00\x01", 8));
  EXPECT_EQ(integer(-(std::int64_t{1} << 31) - 1), std::string("\x8a\x05\xff\xff\xff\x7f\xff"));
  EXPECT_EQ(body([](pickle_writer& p) { p.unsigned_integer(std::uint64_t{1} << 63); }),
            std::string("\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00", 11));
  EXPECT_EQ(body([](pickle_writer& p) { p.string("ab"); }), std::string("\x8c\x02"
                                                                        "ab"));
  // A byte that starts no UTF-8 sequence becomes U+FFFD.
  EXPECT_EQ(body([](pickle_writer& p) { p.string("a\xff"); }), std::string("\x8c\x04"
                                                                           "a\xef\xbf\xbd"));
  EXPECT_EQ(body([](pickle_writer& p) { p.string(std::string(300, 'x')); }),
            std::string("X\x2c\x01\x00\x00", 5) + std::string(300, 'x'));
  // A shared string is written once and fetched after.
  EXPECT_EQ(body([](pickle_writer& p) {
              p.begin_list();
              p.shared_string("k");
              p.shared_string("k");
              p.end_list();
            }),
            std::string("](\x8c\x01k\x94h\x00"
                        "e",
                        9));
}

TEST(trace_write, pickle_containers_are_filled_in_batches_of_1000) {
  pickle_writer out;
  out.begin_list();
  for (int i = 0; i < 2500; ++i) out.integer(1);
  out.end_list();
  const std::string pickle = out.finish();
  EXPECT_EQ(std::count(pickle.begin(), pickle.end(), '('), 3);  // MARK per batch
  EXPECT_EQ(std::count(pickle.begin(), pickle.end(), 'e'), 3);  // APPENDS per batch
  pickle_writer unbalanced;
  unbalanced.begin_dict();
  EXPECT_THROW(unbalanced.end_list(), std::logic_error);
}

// The history: every alloc lies in memory the allocator holds at that moment, and the
// segments at the end hold exactly the blocks still live.
TEST(trace_write, history_places_every_block_in_held_memory) {
  const trace_data trace = read(fixture("small.trace.csv"));
  for (const pool_policy policy : {pool_policy::segments, pool_policy::arena}) {
    SCOPED_TRACE(static_cast<int>(policy));
    replay_options options;
    options.policy = policy;
    const allocator_history history = record_history(trace, options);
    EXPECT_TRUE(history.completed);
    EXPECT_EQ(history.events, trace.events.size());
    std::vector<std::pair<address_t, address_t>> held;  // [start, end), as taken
    std::vector<std::pair<address_t, std::uint64_t>> live;
    std::size_t allocs = 0, frees = 0;
    for (const history_event& entry : history.entries) {
      using kinds = history_event::kinds;
      if (entry.kind == kinds::segment_alloc || entry.kind == kinds::segment_map) {
        held.emplace_back(entry.address, entry.address + entry.size);
      } else if (entry.kind == kinds::segment_free || entry.kind == kinds::segment_unmap) {
        // Segments go back whole, pages one by one, as they came.
        const auto it = std::find(held.begin(), held.end(),
                                  std::pair{entry.address, entry.address + entry.size});
        ASSERT_NE(it, held.end());
        held.erase(it);
      } else if (entry.kind == kinds::alloc) {
        ++allocs;
        // Covered by held ranges end to end (a large block spans several pages).
        address_t covered = entry.address;
        for (bool found = true; found && covered < entry.address + entry.size;) {
          found = false;
          for (const auto& [start, end] : held) {
            if (start <= covered && covered < end) {
              covered = end;
              found = true;
            }
          }
        }
        EXPECT_GE(covered, entry.address + entry.size)
            << "block of " << entry.size << " outside the memory held";
        live.emplace_back(entry.address, entry.block);
      } else if (entry.kind == kinds::free) {
        ++frees;
        live.erase(std::find(live.begin(), live.end(), std::pair{entry.address, entry.block}));
      }
    }
    EXPECT_EQ(allocs, trace.allocations);
    EXPECT_EQ(allocs - frees, history.live_blocks.size());
    std::sort(live.begin(), live.end());
    EXPECT_EQ(live, history.live_blocks);
    EXPECT_FALSE(history.segments.empty());
    EXPECT_EQ(history.segments.size(), history.segment_in_range.size());
    const std::string pickle = write_pytorch_snapshot({{&trace, &history}});
    EXPECT_EQ(pickle.back(), '.');
  }
}

// The report rebuilds the memory at any moment from the history: up to the peak, it
// holds the segments and pages the allocator holds at the end of the trace cut there,
// and the blocks live there.
TEST(trace_write, history_up_to_a_moment_is_the_memory_at_that_moment) {
  for (const std::string& path :
       {fixture("small.trace.csv"),
        std::string(MEMKIT_SOURCE_DIR) + "/data/traces/resnet50_train.trace.csv.gz"}) {
    for (const pool_policy policy : {pool_policy::segments, pool_policy::arena}) {
      SCOPED_TRACE(path + (policy == pool_policy::arena ? " arena" : " segments"));
      const trace_data trace = read(path);
      replay_options options;
      options.policy = policy;
      options.granularity = 1 << 20;
      const replay_observation seen = observe(trace, options);
      trace_data cut = trace;
      cut.events.resize(seen.peak_event + 1);
      const allocator_history there = record_history(cut, options);

      std::map<address_t, std::size_t> held;  // segments and pages, by address
      std::map<address_t, std::size_t> live;  // blocks: address -> block size
      for (const history_event& entry : seen.history.entries) {
        if (entry.event > seen.peak_event) break;
        using kinds = history_event::kinds;
        switch (entry.kind) {
          case kinds::segment_alloc:
          case kinds::segment_map:
            held[entry.address] = entry.size;
            break;
          case kinds::segment_free:
          case kinds::segment_unmap:
            held.erase(entry.address);
            break;
          case kinds::alloc:
            live[entry.address] = entry.block_size;
            break;
          case kinds::free:
            live.erase(entry.address);
            break;
          case kinds::oom:
            break;
        }
      }
      // Pages next to each other are one run, as calculate_segments gives them.
      std::vector<std::pair<address_t, std::size_t>> runs;
      for (const auto& [address, size] : held) {
        if (!runs.empty() && runs.back().first + runs.back().second == address) {
          runs.back().second += size;
        } else {
          runs.emplace_back(address, size);
        }
      }
      std::vector<std::pair<address_t, std::size_t>> segments;
      std::map<address_t, std::size_t> live_there;
      for (const segment_view& segment : there.segments) {
        segments.emplace_back(segment.base, segment.size);
        for (const block_view& block : segment.blocks) {
          if (block.live) live_there[segment.base + block.offset] = block.size;
        }
      }
      EXPECT_EQ(runs, segments);
      // Every block the trace holds is live there with its size (the allocator may also
      // keep freed blocks parked for reuse).
      EXPECT_EQ(live.size(), there.live_blocks.size());
      for (const auto& [address, size] : live) {
        ASSERT_TRUE(live_there.contains(address)) << address;
        EXPECT_EQ(live_there[address], size);
      }
    }
  }
}

}  // namespace
}  // namespace memkit::trace

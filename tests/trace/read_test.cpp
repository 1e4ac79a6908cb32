// The trace readers: each format on small fixtures, and each kind of bad input giving
// an error that names the file and line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "memkit/trace.hpp"

namespace memkit::trace {
namespace {

std::string fixture(const std::string& name) {
  return std::string(MEMKIT_SOURCE_DIR) + "/tests/data/traces/" + name;
}

// The message of the trace_error that reading `name` throws.
std::string read_error(const std::string& name) {
  try {
    read(fixture(name));
  } catch (const trace_error& error) {
    return error.what();
  }
  return "no error";
}

// The message of the trace_error that parsing `text` as file `name` throws.
std::string parse_error(const std::string& text, const std::string& name) {
  try {
    parse(text, name);
  } catch (const trace_error& error) {
    return error.what();
  }
  return "no error";
}

TEST(trace_read, memkit_csv_plain_and_gzip_agree) {
  for (const char* name : {"small.trace.csv", "small.trace.csv.gz"}) {
    SCOPED_TRACE(name);
    const trace_data trace = read(fixture(name));
    EXPECT_EQ(trace.source_format, format::memkit);
    EXPECT_EQ(trace.name, "small");
    ASSERT_EQ(trace.events.size(), 9u);
    EXPECT_EQ(trace.allocations, 5u);
    ASSERT_EQ(trace.streams.size(), 2u);
    EXPECT_EQ(trace.streams[0], "0");
    EXPECT_EQ(trace.streams[1], "7");
    EXPECT_EQ(trace.get_metadata("pytorch_peak_reserved"), "4194304");
    EXPECT_EQ(trace.events[0].kind, action::allocate);
    EXPECT_EQ(trace.events[0].size, 1048576u);
    EXPECT_EQ(trace.events[0].line, 5u);
    EXPECT_EQ(trace.events[2].kind, action::free);
    EXPECT_EQ(trace.events[2].block, 0u);
    EXPECT_EQ(trace.events[3].stream, 1u);
    EXPECT_EQ(calculate_peak_live(trace), 512u + 1048576u + 3145728u);
  }
}

TEST(trace_read, rmm_log_reuses_pointers_and_skips_failed_allocations) {
  const trace_data trace = read(fixture("rmm_log.csv"));
  EXPECT_EQ(trace.source_format, format::rmm);
  EXPECT_EQ(trace.allocations, 3u);  // the failure is not an allocation
  EXPECT_EQ(trace.events.size(), 6u);
  EXPECT_EQ(trace.streams.size(), 2u);
  EXPECT_EQ(trace.get_metadata("rmm_failed_allocations"), "1");
  // The pointer freed at the fourth line comes back as a new block.
  EXPECT_EQ(trace.events[3].block, 2u);
  EXPECT_EQ(trace.events[5].block, 2u);
  EXPECT_EQ(calculate_peak_live(trace), 4096u + 2048u);
}

TEST(trace_read, pytorch_snapshot_keeps_alloc_and_free_requested) {
  const trace_data trace = read(fixture("pytorch_snapshot.json"));
  EXPECT_EQ(trace.source_format, format::pytorch);
  EXPECT_EQ(trace.allocations, 3u);
  ASSERT_EQ(trace.events.size(), 5u);
  EXPECT_EQ(trace.streams.size(), 2u);
  EXPECT_EQ(trace.events[0].line, 6u);  // the line where the entry starts
  EXPECT_EQ(trace.events[2].kind, action::free);
  EXPECT_EQ(calculate_peak_live(trace), 1536u + 1024u);
  EXPECT_EQ(trace.get_metadata("device"), "0");
}

TEST(trace_read, pytorch_snapshot_keeps_the_frames_of_allocations) {
  const trace_data trace = read(fixture("pytorch_snapshot.json"));
  ASSERT_EQ(trace.stacks.size(), 1u);
  ASSERT_EQ(trace.block_stacks.size(), trace.allocations);
  EXPECT_EQ(trace.get_stack(0), (std::vector<frame>{{"train.py", 10, "forward"}}));
  EXPECT_TRUE(trace.get_stack(1).empty());  // an empty list of frames: none known
  EXPECT_TRUE(trace.get_stack(2).empty());

  // The same stack twice is one stack; other keys of a frame are skipped.
  const std::string text = R"({"device_traces": [[
    {"action": "alloc", "addr": 1, "size": 8, "frames": [
      {"filename": "a.py", "line": 1, "name": "f", "column": 4}, {"filename": "b.py", "line": 2, "name": "g"}]},
    {"action": "alloc", "addr": 2, "size": 8, "frames": [
      {"filename": "a.py", "line": 1, "name": "f"}, {"filename": "b.py", "line": 2, "name": "g"}]},
    {"action": "free_requested", "addr": 1, "size": 8, "frames": [{"filename": "c.py", "line": 3, "name": "h"}]}
  ]]})";
  const trace_data shared = parse(text, "shared.json");
  ASSERT_EQ(shared.stacks.size(), 1u);
  EXPECT_EQ(shared.stacks[0], (std::vector<frame>{{"a.py", 1, "f"}, {"b.py", 2, "g"}}));
  EXPECT_EQ(shared.block_stacks, (std::vector<std::uint32_t>{1, 1}));

  EXPECT_EQ(parse_error(R"({"device_traces": [[{"action": "alloc", "addr": 1, "size": 8,
      "frames": [{"filename": "a.py", "line": "x", "name": "f"}]}]]})",
                        "bad_frame.json"),
            "[memkit::trace::read] bad_frame.json:1: frame field 'line' is not a non-negative "
            "integer");
}

// A snapshot PyTorch 2.11 wrote (a small training loop on an H200, Python frames).
TEST(trace_read, pytorch_2_11_snapshot_frames) {
  const trace_data trace = read(fixture("pytorch_2_11_frames.json"));
  EXPECT_EQ(trace.allocations, 58u);
  EXPECT_EQ(trace.events.size(), 113u);
  EXPECT_EQ(trace.stacks.size(), 6u);
  ASSERT_EQ(trace.block_stacks.size(), trace.allocations);
  // The backward pass runs in autograd's own thread: its 31 allocations have no Python
  // frames. Block 6 is the first Linear's forward (32 MiB).
  EXPECT_EQ(std::count(trace.block_stacks.begin(), trace.block_stacks.end(), 0u), 31);
  EXPECT_EQ(trace.events[6].size, 33554432u);
  const std::vector<frame>& stack = trace.get_stack(6);
  ASSERT_EQ(stack.size(), 8u);
  EXPECT_TRUE(stack.front().filename.ends_with("torch/nn/modules/linear.py"));
  EXPECT_EQ(stack.front().name, "forward");
  EXPECT_EQ(stack[6], (frame{"/tmp/rec.py", 9, "train"}));
  EXPECT_EQ(stack.back(), (frame{"/tmp/rec.py", 14, "<module>"}));
  EXPECT_EQ(calculate_peak_live(trace), 69447768u);
}

TEST(trace_read, memkit_csv_call_stacks) {
  const trace_data trace = parse(
      "@7,train.py,10,forward\n"
      "@7,model%2Cv2.py,3,block%25 layer\n"
      "a,0,512,0,@7\n"
      "a,1,256\n"
      "a,2,128,0,17,@7\n"
      "@8,data.py,1,load\n"
      "a,3,64,@8\n"
      "f,0\n",
      "stacks.csv");
  ASSERT_EQ(trace.allocations, 4u);
  ASSERT_EQ(trace.stacks.size(), 2u);
  EXPECT_EQ(trace.get_stack(0),
            (std::vector<frame>{{"train.py", 10, "forward"}, {"model,v2.py", 3, "block% layer"}}));
  EXPECT_EQ(trace.block_stacks, (std::vector<std::uint32_t>{1, 0, 1, 2}));
  EXPECT_EQ(trace.get_stack(3), (std::vector<frame>{{"data.py", 1, "load"}}));
  EXPECT_EQ(trace.events[2].size, 128u);
  EXPECT_EQ(trace.streams.size(), 1u);  // a,3,64,@8 is on stream 0

  // Without stacks, nothing is stored per block.
  EXPECT_TRUE(parse("a,0,1,0\nf,0\n", "plain.csv").block_stacks.empty());

  EXPECT_EQ(parse_error("a,0,1,0,@3\n", "stacks.csv"),
            "[memkit::trace::read] stacks.csv:1: stack @3 is not defined before its use");
  EXPECT_EQ(parse_error("@3,a.py,1,f\na,0,1,0,@3\n@3,b.py,2,g\n", "stacks.csv"),
            "[memkit::trace::read] stacks.csv:3: a frame added to stack @3 after an allocation "
            "used it (line 2)");
  EXPECT_EQ(parse_error("@3,a%2.py,1,f\n", "stacks.csv"),
            "[memkit::trace::read] stacks.csv:1: bad %-escape in the file 'a%2.py'");
  EXPECT_EQ(parse_error("@3,a.py,1\n", "stacks.csv"),
            "[memkit::trace::read] stacks.csv:1: expected '@<stack>,<file>,<line>,<function>', "
            "got '@3,a.py,1'");
  EXPECT_EQ(parse_error("@x,a.py,1,f\n", "stacks.csv"),
            "[memkit::trace::read] stacks.csv:1: bad stack id '@x'");
  EXPECT_EQ(parse_error("@1,a.py,one,f\n", "stacks.csv"),
            "[memkit::trace::read] stacks.csv:1: bad line number 'one'");
}

TEST(trace_read, format_is_detected_from_content) {
  EXPECT_EQ(detect_format("# x: y\na,0,1,0\n"), format::memkit);
  EXPECT_EQ(detect_format("\n# note\nThread,Time,Action,Pointer,Size,Stream\n"), format::rmm);
  EXPECT_EQ(detect_format("  \n{\"device_traces\": []}"), format::pytorch);
  EXPECT_EQ(parse("a,1,10,0\r\nf,1\r\n", "crlf.csv").events.size(), 2u);
}

TEST(trace_read, bad_input_names_file_and_line) {
  struct expectation {
    const char* file;
    const char* where;
    const char* what;
  };
  const expectation cases[] = {
      {"bad_action.csv", "bad_action.csv:3: ", "unknown action 'x'"},
      {"malformed_line.csv", "malformed_line.csv:2: ", "bad size '12ab'"},
      {"missing_field.csv",
       "missing_field.csv:2: ", "expected 'a,<id>,<size>,<stream>[,<ns>][,@<stack>]'"},
      {"unknown_free.csv", "unknown_free.csv:3: ", "free of unknown block id 5"},
      {"repeated_free.csv", "repeated_free.csv:3: ", "repeated free of block id 0"},
      {"live_allocation.csv", "live_allocation.csv:2: ", "which is live"},
      {"truncated.trace.csv.gz", "truncated.trace.csv.gz:", "truncated gzip stream"},
      {"rmm_unknown_action.csv", "rmm_unknown_action.csv:3: ", "unknown action 'reallocate'"},
      {"rmm_unknown_free.csv", "rmm_unknown_free.csv:3: ", "free of unknown pointer 0x2000"},
      {"pytorch_unknown_free.json",
       "pytorch_unknown_free.json:3: ", "free of unknown address 0x2000"},
      {"pytorch_unknown_action.json",
       "pytorch_unknown_action.json:3: ", "unknown action 'teleport'"},
      {"pytorch_truncated.json", "pytorch_truncated.json:3: ", "invalid JSON"},
  };
  for (const expectation& c : cases) {
    SCOPED_TRACE(c.file);
    const std::string message = read_error(c.file);
    EXPECT_EQ(message.rfind("[memkit::trace::read] ", 0), 0u) << message;
    EXPECT_NE(message.find(c.where), std::string::npos) << message;
    EXPECT_NE(message.find(c.what), std::string::npos) << message;
  }
}

TEST(trace_read, steps_metadata_and_step_markers) {
  const trace_data keyed = parse("# steps: 3\n# warmup_steps: 2\na,0,1,0\nf,0\n", "keyed.csv");
  EXPECT_EQ(keyed.steps, 3u);
  EXPECT_EQ(keyed.warmup_steps, 2u);
  EXPECT_TRUE(keyed.step_starts.empty());
  EXPECT_EQ(keyed.get_metadata("steps"), "3");

  const trace_data plain = parse("a,0,1,0\nf,0\n", "plain.csv");
  EXPECT_EQ(plain.steps, 0u);
  EXPECT_EQ(plain.warmup_steps, 0u);

  // Markers alone give the steps and a warmup of 1; a marker may stand before the first
  // event and after the last.
  const trace_data marked = parse("s\na,0,1,0\ns\r\n f,0\na,1,1\n s \nf,1\ns\n", "marked.csv");
  EXPECT_EQ(marked.events.size(), 4u);
  EXPECT_EQ(marked.steps, 4u);
  EXPECT_EQ(marked.warmup_steps, 1u);
  EXPECT_EQ(marked.step_starts, (std::vector<std::uint64_t>{0, 1, 3, 4}));

  const trace_data both = parse("# steps: 2\n# warmup_steps: 0\ns\na,0,1,0\ns\nf,0\n", "both.csv");
  EXPECT_EQ(both.steps, 2u);
  EXPECT_EQ(both.warmup_steps, 0u);
}

TEST(trace_read, bad_steps_name_file_and_line) {
  const auto error = [](const std::string& text) { return parse_error(text, "steps.csv"); };
  EXPECT_EQ(error("a,0,1,0\n# steps: 0\n"),
            "[memkit::trace::read] steps.csv:2: steps must be a positive integer, got '0'");
  EXPECT_EQ(error("# steps: 2.5\n"),
            "[memkit::trace::read] steps.csv:1: steps must be a positive integer, got '2.5'");
  EXPECT_EQ(error("# steps: -1\n"),
            "[memkit::trace::read] steps.csv:1: steps must be a positive integer, got '-1'");
  EXPECT_EQ(error("# steps: 4\n# warmup_steps: x\n"),
            "[memkit::trace::read] steps.csv:2: warmup_steps must be a non-negative integer, got "
            "'x'");
  EXPECT_EQ(error("# warmup_steps: 4\n# steps: 4\n"),
            "[memkit::trace::read] steps.csv:1: warmup_steps 4 is not below steps 4");
  EXPECT_EQ(error("s\ns\n# warmup_steps: 2\n"),
            "[memkit::trace::read] steps.csv:3: warmup_steps 2 is not below steps 2");
  EXPECT_NE(error("# warmup_steps: 0\n").find("steps.csv:1: warmup_steps without steps"),
            std::string::npos);
  EXPECT_EQ(error("# steps: 3\ns\na,0,1,0\ns\n"),
            "[memkit::trace::read] steps.csv:1: steps is 3 but the trace has 2 step markers ('s' "
            "lines)");
  EXPECT_EQ(error("# steps: 3\n# steps: 3\n"),
            "[memkit::trace::read] steps.csv:2: repeated key 'steps' (first at line 1)");
  EXPECT_EQ(
      error("a,0,1,0\ns,1\n"),
      "[memkit::trace::read] steps.csv:2: unknown action 's' (expected 'a', 'f', 's' or '@')");
}

// A PyTorch snapshot whose device traces hold something other than entry objects is
// an error naming the line, not a trace with those entries left out.
TEST(trace_read, pytorch_entries_that_are_not_objects_are_errors) {
  const auto error = [](const std::string& text) { return parse_error(text, "snap.json"); };

  EXPECT_NE(error("{\"device_traces\": [[\n7]]}")
                .find("snap.json:2: an entry of a device trace is not an object"),
            std::string::npos);
  EXPECT_NE(
      error("{\"device_traces\": [[[]]]}").find("an entry of a device trace is not an object"),
      std::string::npos);
  EXPECT_NE(error("{\"device_traces\": [\"x\"]}").find("a device trace is not a list"),
            std::string::npos);
  EXPECT_NE(error("{\"device_traces\": [[]]}").find("snap.json:1: no allocation or free"),
            std::string::npos);
}

// A trace with no allocation or free (empty, comments only) is an error, as documented.
TEST(trace_read, an_empty_trace_is_an_error) {
  for (const char* text : {"", "\n\n", "# workload: w\n# steps: 1\ns\n"}) {
    const std::string message = parse_error(text, "empty.csv");
    EXPECT_NE(message.find("empty.csv:"), std::string::npos) << message;
    EXPECT_NE(message.find("no allocation or free"), std::string::npos) << message;
  }
}

TEST(trace_read, missing_file_is_an_error) {
  EXPECT_NE(read_error("no_such_file.csv").find("cannot open"), std::string::npos);
}

TEST(trace_read, garbage_never_crashes) {
  // Every prefix of a valid trace either reads or throws trace_error.
  const std::string text =
      "# workload: w\na,0,100,0\na,1,200,1\nf,0\nThread,Time\n{\"device_traces\":[[{\"action\"";
  for (std::size_t length = 0; length <= text.size(); ++length) {
    try {
      parse(std::string_view(text).substr(0, length), "prefix.csv");
    } catch (const trace_error&) {
    }
  }
  for (std::size_t length = 0; length <= text.size(); ++length) {
    try {
      parse(std::string_view(text).substr(length), "suffix.csv");
    } catch (const trace_error&) {
    }
  }
}

}  // namespace
}  // namespace memkit::trace

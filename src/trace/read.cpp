// Trace readers: the memkit CSV, RMM's logging CSV and PyTorch snapshots as JSON.

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>

#include "common/helpers.hpp"
#include "io/input_file.hpp"
#include "memkit/errors.hpp"
#include "memkit/trace.hpp"

namespace memkit::trace {
namespace {

constexpr const char* kRead = "[memkit::trace::read] ";

using common::hex;
using common::split;
using common::trim;

[[noreturn]] void fail_at(const std::string& path, std::uint64_t line, const std::string& what) {
  throw trace_error(kRead + path + ":" + std::to_string(line) + ": " + what);
}

std::string quote(std::string_view text) { return quote_input(text); }

bool parse_unsigned(std::string_view text, std::uint64_t& value, int base = 10) {
  if (text.empty()) return false;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  return error == std::errc{} && end == text.data() + text.size();
}

// A pointer as RMM prints it with %p: 0x7f.., or (nil) / 0 for a null pointer.
bool parse_pointer(std::string_view text, std::uint64_t& value) {
  if (text == "(nil)" || text == "nullptr" || text == "0") {
    value = 0;
    return true;
  }
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    return parse_unsigned(text.substr(2), value, 16);
  }
  return parse_unsigned(text, value, 16);
}

// Turns keys that name live blocks (ids, pointers, addresses) into events over dense
// block numbers, checking that every free matches a live block.
class trace_builder {
 public:
  enum class key_kind { id, pointer, address };

  trace_builder(trace_data& trace, key_kind kind) : trace_(trace), kind_(kind) {}

  // `stack` is 1 + the index of the block's stack in trace.stacks, 0 when unknown.
  void allocate(std::uint64_t key, std::size_t size, std::string_view stream, std::uint64_t line,
                std::uint32_t stack = 0) {
    auto [it, inserted] = blocks_.try_emplace(key);
    if (!inserted && it->second.live) {
      fail(line, "allocation of " + describe(key) + ", which is live (allocated at line " +
                     std::to_string(it->second.line) + ")");
    }
    if (trace_.allocations == kMaxAllocations) {
      fail(line, "more than " + std::to_string(kMaxAllocations) +
                     " allocations: past what a replay takes");
    }
    it->second = {true, trace_.allocations, line};
    trace_.events.push_back(
        {action::allocate, stream_number(stream), trace_.allocations, size, line});
    if (stack != 0 || !trace_.block_stacks.empty()) {
      trace_.block_stacks.resize(trace_.allocations, 0);
      trace_.block_stacks.push_back(stack);
    }
    ++trace_.allocations;
  }

  // 1 + the index in trace.stacks of a stack with these frames, added when new.
  std::uint32_t intern_stack(std::vector<frame>&& frames, std::uint64_t line) {
    if (frames.empty()) return 0;
    std::string key;
    for (const frame& f : frames) {
      key += std::to_string(f.filename.size()) + ':' + f.filename + std::to_string(f.line) + ':' +
             std::to_string(f.name.size()) + ':' + f.name;
    }
    const auto it = stack_numbers_.find(key);
    if (it != stack_numbers_.end()) return it->second;
    if (trace_.stacks.size() == kMaxStacks) {
      fail(line, "more than " + std::to_string(kMaxStacks) +
                     " distinct call stacks: past what a replay takes");
    }
    trace_.stacks.push_back(std::move(frames));
    const auto number = static_cast<std::uint32_t>(trace_.stacks.size());
    stack_numbers_.emplace(std::move(key), number);
    return number;
  }

  // After the last event: every block has an entry when any has a stack.
  void finish() {
    if (!trace_.block_stacks.empty()) trace_.block_stacks.resize(trace_.allocations, 0);
  }

  void free(std::uint64_t key, std::uint64_t line) {
    const auto it = blocks_.find(key);
    if (it == blocks_.end()) fail(line, "free of unknown " + describe(key));
    if (!it->second.live) {
      fail(line, "repeated free of " + describe(key) + " (freed at line " +
                     std::to_string(it->second.line) + ")");
    }
    it->second.live = false;
    it->second.line = line;
    trace_.events.push_back({action::free, 0, it->second.block, 0, line});
  }

  [[noreturn]] void fail(std::uint64_t line, const std::string& what) const {
    fail_at(trace_.path, line, what);
  }

 private:
  struct block_state {
    bool live = false;
    std::uint64_t block = 0;
    std::uint64_t line = 0;  // of the allocation while live, of the free after
  };

  std::string describe(std::uint64_t key) const {
    switch (kind_) {
      case key_kind::id:
        return "block id " + std::to_string(key);
      case key_kind::pointer:
        return "pointer " + hex(key);
      case key_kind::address:
        return "address " + hex(key);
    }
    return std::to_string(key);
  }

  std::uint32_t stream_number(std::string_view label) {
    const auto it = stream_numbers_.find(std::string(label));
    if (it != stream_numbers_.end()) return it->second;
    const auto number = static_cast<std::uint32_t>(trace_.streams.size());
    trace_.streams.emplace_back(label);
    stream_numbers_.emplace(std::string(label), number);
    return number;
  }

  trace_data& trace_;
  key_kind kind_;
  std::unordered_map<std::uint64_t, block_state> blocks_;
  std::unordered_map<std::string, std::uint32_t> stream_numbers_;
  std::unordered_map<std::string, std::uint32_t> stack_numbers_;
};

// Calls `on_line(line_number, line)` for every line of `text`.
template <class Function>
void for_each_line(std::string_view text, Function&& on_line) {
  std::uint64_t number = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    on_line(++number, text.substr(start, end - start));
    start = end + 1;
  }
}

// Where the step keys stand, for messages (0: absent).
struct step_key_lines {
  std::uint64_t steps = 0;
  std::uint64_t warmup_steps = 0;
};

// `# key: value` adds metadata; any other `#` line is a comment. The step keys are
// checked here, where their line is known: `steps` a positive integer, `warmup_steps`
// a non-negative one, each given once.
void read_metadata_line(std::string_view line, std::uint64_t line_number, trace_data& trace,
                        step_key_lines& step_lines) {
  line = trim(line.substr(1));
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0) return;
  const std::string_view key = trim(line.substr(0, colon));
  if (key.find(' ') != std::string_view::npos) return;  // prose, not a key
  const std::string_view value = trim(line.substr(colon + 1));
  if (key == "steps" || key == "warmup_steps") {
    const bool is_steps = key == "steps";
    std::uint64_t& seen_at = is_steps ? step_lines.steps : step_lines.warmup_steps;
    if (seen_at != 0) {
      fail_at(trace.path, line_number,
              "repeated key " + quote(key) + " (first at line " + std::to_string(seen_at) + ")");
    }
    std::uint64_t number = 0;
    if (!parse_unsigned(value, number) || (is_steps && number == 0)) {
      fail_at(trace.path, line_number,
              std::string(key) + " must be a " + (is_steps ? "positive" : "non-negative") +
                  " integer, got " + quote(value));
    }
    seen_at = line_number;
    (is_steps ? trace.steps : trace.warmup_steps) = number;
  }
  trace.metadata.emplace_back(std::string(key), std::string(value));
}

// After the whole trace: the steps from the markers when the metadata gives none, the
// default warmup, and warmup_steps < steps == the markers' count (when there are any).
void check_steps(trace_data& trace, const step_key_lines& step_lines) {
  const std::uint64_t markers = trace.step_starts.size();
  if (step_lines.steps != 0 && markers != 0 && trace.steps != markers) {
    fail_at(trace.path, step_lines.steps,
            "steps is " + std::to_string(trace.steps) + " but the trace has " +
                std::to_string(markers) + " step marker" + (markers == 1 ? "" : "s") +
                " ('s' lines)");
  }
  if (step_lines.steps == 0) trace.steps = markers;
  if (step_lines.warmup_steps == 0) {
    trace.warmup_steps = markers != 0 ? 1 : 0;
    return;
  }
  if (trace.steps == 0) {
    fail_at(trace.path, step_lines.warmup_steps,
            "warmup_steps without steps (a '# steps: N' line or 's' step markers)");
  }
  if (trace.warmup_steps >= trace.steps) {
    fail_at(trace.path, step_lines.warmup_steps,
            "warmup_steps " + std::to_string(trace.warmup_steps) + " is not below steps " +
                std::to_string(trace.steps));
  }
}

// `%XX` (two hex digits) is the byte XX: a frame's file and function escape `%`,
// `,` and line ends that way. Returns false on a `%` not followed by two hex digits.
bool percent_decode(std::string_view text, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    std::uint64_t byte = 0;
    if (i + 2 >= text.size() || !parse_unsigned(text.substr(i + 1, 2), byte, 16)) {
      return false;
    }
    out += static_cast<char>(byte);
    i += 2;
  }
  return true;
}

// The memkit CSV's call stacks: `@<stack>,<file>,<line>,<function>` lines add a frame
// to a stack (innermost first), and an allocation's `@<stack>` field uses it. A stack
// is complete once an allocation uses it.
class csv_stacks {
 public:
  explicit csv_stacks(trace_builder& builder) : builder_(builder) {}

  void add_frame(const std::vector<std::string_view>& fields, std::string_view text,
                 std::uint64_t line) {
    if (fields.size() != 4) {
      builder_.fail(line, "expected '@<stack>,<file>,<line>,<function>', got " + quote(text));
    }
    std::uint64_t id = 0;
    if (!parse_unsigned(fields[0].substr(1), id)) {
      builder_.fail(line, "bad stack id " + quote(fields[0]));
    }
    frame f;
    if (!percent_decode(fields[1], f.filename)) {
      builder_.fail(line, "bad %-escape in the file " + quote(fields[1]));
    }
    if (!parse_unsigned(fields[2], f.line)) {
      builder_.fail(line, "bad line number " + quote(fields[2]));
    }
    if (!percent_decode(fields[3], f.name)) {
      builder_.fail(line, "bad %-escape in the function " + quote(fields[3]));
    }
    auto [it, inserted] = stacks_.try_emplace(id);
    pending& stack = it->second;
    if (inserted) {
      if (stacks_.size() > kMaxStacks) {
        builder_.fail(line, "more than " + std::to_string(kMaxStacks) + " call stacks");
      }
      stack.line = line;
    }
    if (stack.number != 0) {
      builder_.fail(line, "a frame added to stack @" + std::to_string(id) +
                              " after an allocation used it (line " +
                              std::to_string(stack.used_at) + ")");
    }
    if (stack.frames.size() == kMaxFramesPerStack) {
      builder_.fail(line, "more than " + std::to_string(kMaxFramesPerStack) + " frames in stack @" +
                              std::to_string(id));
    }
    stack.frames.push_back(std::move(f));
  }

  // The stack of an allocation's `@<stack>` field: 1 + its index in trace.stacks.
  std::uint32_t use(std::string_view field, std::uint64_t line) {
    std::uint64_t id = 0;
    if (!parse_unsigned(field.substr(1), id)) builder_.fail(line, "bad stack id " + quote(field));
    const auto it = stacks_.find(id);
    if (it == stacks_.end()) {
      builder_.fail(line, "stack @" + std::to_string(id) + " is not defined before its use");
    }
    pending& stack = it->second;
    if (stack.number == 0) {
      stack.number = builder_.intern_stack(std::move(stack.frames), line);
      stack.frames = {};
      stack.used_at = line;
    }
    return stack.number;
  }

 private:
  struct pending {
    std::vector<frame> frames;
    std::uint32_t number = 0;  // once used: 1 + its index in trace.stacks
    std::uint64_t line = 0;    // of its first frame
    std::uint64_t used_at = 0;
  };
  trace_builder& builder_;
  std::unordered_map<std::uint64_t, pending> stacks_;
};

void parse_memkit(std::string_view text, trace_data& trace, step_key_lines& step_lines) {
  trace_builder builder(trace, trace_builder::key_kind::id);
  csv_stacks stacks(builder);
  for_each_line(text, [&](std::uint64_t line_number, std::string_view line) {
    line = trim(line);
    if (line.empty()) return;
    if (line.front() == '#') {
      read_metadata_line(line, line_number, trace, step_lines);
      return;
    }
    if (line == "s") {  // a step marker: a loop iteration starts with the next event
      trace.step_starts.push_back(trace.events.size());
      return;
    }
    std::vector<std::string_view> fields = split(line, ',');
    if (line.front() == '@') {
      stacks.add_frame(fields, line, line_number);
      return;
    }
    const std::string_view kind = fields[0];
    std::uint64_t id = 0;
    // A recording (allocator_options::record_path) adds the moment, in ns: checked,
    // not replayed.
    const auto check_time = [&](std::string_view field) {
      std::uint64_t ns = 0;
      if (!parse_unsigned(field, ns)) builder.fail(line_number, "bad time " + quote(field));
    };
    if (kind == "a") {
      // The stack, when given, is the last field; the stream may be left out: stream 0.
      std::uint32_t stack = 0;
      if (fields.size() >= 4 && fields.size() <= 6 && fields.back().starts_with('@')) {
        stack = stacks.use(fields.back(), line_number);
        fields.pop_back();
      }
      if (fields.size() < 3 || fields.size() > 5) {
        builder.fail(line_number,
                     "expected 'a,<id>,<size>,<stream>[,<ns>][,@<stack>]', got " + quote(line));
      }
      if (fields.size() == 5) check_time(fields[4]);
      std::uint64_t size = 0;
      if (!parse_unsigned(fields[1], id)) {
        builder.fail(line_number, "bad block id " + quote(fields[1]));
      }
      if (!parse_unsigned(fields[2], size)) {
        builder.fail(line_number, "bad size " + quote(fields[2]));
      }
      const std::string_view stream = fields.size() >= 4 ? fields[3] : std::string_view("0");
      if (stream.empty()) builder.fail(line_number, "empty stream");
      builder.allocate(id, static_cast<std::size_t>(size), stream, line_number, stack);
    } else if (kind == "f") {
      if (fields.size() != 2 && fields.size() != 3) {
        builder.fail(line_number, "expected 'f,<id>[,<ns>]', got " + quote(line));
      }
      if (fields.size() == 3) check_time(fields[2]);
      if (!parse_unsigned(fields[1], id)) {
        builder.fail(line_number, "bad block id " + quote(fields[1]));
      }
      builder.free(id, line_number);
    } else {
      builder.fail(line_number,
                   "unknown action " + quote(kind) + " (expected 'a', 'f', 's' or '@')");
    }
  });
  builder.finish();
}

constexpr std::string_view kRmmHeader = "Thread,Time,Action,Pointer,Size,Stream";

void parse_rmm(std::string_view text, trace_data& trace, step_key_lines& step_lines) {
  trace_builder builder(trace, trace_builder::key_kind::pointer);
  bool seen_header = false;
  std::uint64_t failed_allocations = 0;
  for_each_line(text, [&](std::uint64_t line_number, std::string_view line) {
    line = trim(line);
    if (line.empty()) return;
    if (line.front() == '#') {
      read_metadata_line(line, line_number, trace, step_lines);
      return;
    }
    if (!seen_header) {
      if (line != kRmmHeader) builder.fail(line_number, "expected the header " + quote(kRmmHeader));
      seen_header = true;
      return;
    }
    const std::vector<std::string_view> fields = split(line, ',');
    if (fields.size() != 6) {
      builder.fail(line_number, "expected 6 fields (" + std::string(kRmmHeader) + "), got " +
                                    std::to_string(fields.size()));
    }
    const std::string_view action_name = fields[2];
    std::uint64_t pointer = 0;
    std::uint64_t size = 0;
    if (!parse_pointer(fields[3], pointer)) {
      builder.fail(line_number, "bad pointer " + quote(fields[3]));
    }
    if (!parse_unsigned(fields[4], size)) builder.fail(line_number, "bad size " + quote(fields[4]));
    if (fields[5].empty()) builder.fail(line_number, "empty stream");
    if (action_name == "allocate") {
      // A zero-byte request may come back as a null pointer; nothing is live then.
      if (pointer == 0 && size == 0) return;
      if (pointer == 0) builder.fail(line_number, "allocation returned a null pointer");
      builder.allocate(pointer, static_cast<std::size_t>(size), fields[5], line_number);
    } else if (action_name == "free" || action_name == "deallocate") {
      if (pointer == 0) return;  // freeing null does nothing
      builder.free(pointer, line_number);
    } else if (action_name == "allocate failure") {
      ++failed_allocations;  // nothing was handed out, nothing to replay
    } else {
      builder.fail(line_number, "unknown action " + quote(action_name) +
                                    " (expected allocate, free or allocate failure)");
    }
  });
  if (!seen_header) fail_at(trace.path, 1, "empty RMM log");
  if (failed_allocations > 0) {
    trace.metadata.emplace_back("rmm_failed_allocations", std::to_string(failed_allocations));
  }
}

// A char iterator that counts the newlines it steps over, so the JSON reader can say on
// which line an entry starts.
class line_counting_iterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  line_counting_iterator() = default;
  line_counting_iterator(const char* position, std::uint64_t* line)
      : position_(position), line_(line) {}
  reference operator*() const { return *position_; }
  line_counting_iterator& operator++() {
    if (*position_ == '\n') ++*line_;
    ++position_;
    return *this;
  }
  line_counting_iterator operator++(int) {
    line_counting_iterator before = *this;
    ++*this;
    return before;
  }
  friend bool operator==(const line_counting_iterator& a, const line_counting_iterator& b) {
    return a.position_ == b.position_;
  }

 private:
  const char* position_ = nullptr;
  std::uint64_t* line_ = nullptr;
};

// Streams through a snapshot, keeping only device_traces[d][i].{action, addr, size,
// stream, frames}; segments are skipped without being stored.
class snapshot_reader {
 public:
  using json = nlohmann::json;

  snapshot_reader(trace_data& trace, const std::uint64_t* line)
      : trace_(trace), builder_(trace, trace_builder::key_kind::address), line_(line) {}

  bool null() { return scalar(value{}); }
  bool boolean(bool) { return scalar(value{}); }
  bool number_integer(json::number_integer_t number) {
    value v;
    v.kind = number < 0 ? value::kinds::negative : value::kinds::number;
    v.number = number < 0 ? 0 : static_cast<std::uint64_t>(number);
    return scalar(v);
  }
  bool number_unsigned(json::number_unsigned_t number) {
    value v;
    v.kind = value::kinds::number;
    v.number = number;
    return scalar(v);
  }
  bool number_float(json::number_float_t, const json::string_t&) {
    value v;
    v.kind = value::kinds::fraction;
    return scalar(v);
  }
  bool string(json::string_t& text) {
    value v;
    v.kind = value::kinds::text;
    v.text = text;
    return scalar(v);
  }
  bool binary(json::binary_t&) { return scalar(value{}); }

  bool start_object(std::size_t) {
    if (in_traces() && depth_ == traces_depth_ + 2) begin_entry();
    if (in_frames_ && depth_ == traces_depth_ + 4) {
      frame_ = frame{};
      frame_key_.clear();
    }
    ++depth_;
    return true;
  }
  bool key(json::string_t& name) {
    if (depth_ == 1 && traces_depth_ < 0) root_key_ = name;
    if (in_traces() && depth_ == traces_depth_ + 3) entry_key_ = name;
    if (in_frames_ && depth_ == traces_depth_ + 5) frame_key_ = name;
    return true;
  }
  bool end_object() {
    --depth_;
    if (in_traces() && depth_ == traces_depth_ + 2) end_entry();
    if (in_frames_ && depth_ == traces_depth_ + 4) {
      if (entry_.frames.size() == kMaxFramesPerStack) {
        builder_.fail(entry_.line,
                      "more than " + std::to_string(kMaxFramesPerStack) + " frames in one entry");
      }
      entry_.frames.push_back(std::move(frame_));
    }
    return true;
  }
  bool start_array(std::size_t) {
    if (traces_depth_ < 0 && !traces_done_ &&
        (depth_ == 0 || (depth_ == 1 && root_key_ == "device_traces"))) {
      traces_depth_ = depth_;  // a bare list of device traces is accepted too
    } else if (in_traces() && depth_ == traces_depth_ + 1) {
      ++device_;
    } else if (in_traces() && depth_ == traces_depth_ + 2) {
      not_an_entry();
    } else if (in_traces() && depth_ == traces_depth_ + 3 && entry_key_ == "frames") {
      in_frames_ = true;
    }
    ++depth_;
    return true;
  }
  bool end_array() {
    --depth_;
    if (in_frames_ && depth_ == traces_depth_ + 3) in_frames_ = false;
    if (in_traces() && depth_ == traces_depth_) {
      traces_depth_ = -1;
      traces_done_ = true;
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& error) {
    std::string message = error.what();
    // nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 2: ..."
    const std::size_t colon = message.find(": ");
    if (colon != std::string::npos) message = message.substr(colon + 2);
    builder_.fail(*line_, "invalid JSON: " + message);
  }

  void finish() {
    if (!traces_done_) fail_at(trace_.path, *line_, "no device_traces list in the snapshot");
    builder_.finish();
    trace_.metadata.emplace_back("source", "PyTorch memory snapshot");
    if (used_device_ >= 0) {
      trace_.metadata.emplace_back("device", std::to_string(used_device_));
    }
    if (!skipped_devices_.empty()) {
      trace_.metadata.emplace_back("skipped_devices", skipped_devices_);
    }
  }

 private:
  struct value {
    enum class kinds { other, number, negative, fraction, text };
    kinds kind = kinds::other;
    std::uint64_t number = 0;
    std::string text;
  };
  struct entry {
    std::uint64_t line = 0;
    bool has_action = false, has_addr = false, has_size = false, has_stream = false;
    std::string action;
    std::uint64_t addr = 0;
    std::uint64_t size = 0;
    std::string stream;
    std::vector<frame> frames;  // where the block was allocated, innermost first
  };

  bool in_traces() const { return traces_depth_ >= 0; }

  // device_traces holds one list per device, of entries that are objects: anything
  // else there is not skipped quietly.
  [[noreturn]] void not_an_entry() {
    builder_.fail(*line_, depth_ == traces_depth_ + 1
                              ? "a device trace is not a list"
                              : "an entry of a device trace is not an object");
  }

  bool scalar(const value& v) {
    if (in_traces() && depth_ <= traces_depth_ + 2) not_an_entry();
    if (in_frames_ && depth_ == traces_depth_ + 5) {
      read_frame_field(v);
      return true;
    }
    if (!in_traces() || depth_ != traces_depth_ + 3) return true;
    const auto need_number = [&](const char* field) {
      if (v.kind != value::kinds::number) {
        builder_.fail(entry_.line,
                      std::string("entry field '") + field + "' is not a non-negative integer");
      }
    };
    if (entry_key_ == "action") {
      if (v.kind != value::kinds::text)
        builder_.fail(entry_.line, "entry field 'action' is not a string");
      entry_.action = v.text;
      entry_.has_action = true;
    } else if (entry_key_ == "addr") {
      need_number("addr");
      entry_.addr = v.number;
      entry_.has_addr = true;
    } else if (entry_key_ == "size") {
      need_number("size");
      entry_.size = v.number;
      entry_.has_size = true;
    } else if (entry_key_ == "stream") {
      if (v.kind == value::kinds::number) {
        entry_.stream = std::to_string(v.number);
      } else if (v.kind == value::kinds::negative) {
        entry_.stream = "negative";  // only a label; never seen in practice
      } else if (v.kind == value::kinds::text) {
        entry_.stream = v.text;
      } else {
        builder_.fail(entry_.line, "entry field 'stream' is neither a number nor a string");
      }
      entry_.has_stream = true;
    }
    return true;
  }

  // A frame's filename, line and name; other keys are skipped.
  void read_frame_field(const value& v) {
    const bool is_line = frame_key_ == "line";
    if (!is_line && frame_key_ != "filename" && frame_key_ != "name") return;
    if (is_line ? v.kind != value::kinds::number : v.kind != value::kinds::text) {
      builder_.fail(entry_.line, "frame field '" + frame_key_ + "' is not " +
                                     (is_line ? "a non-negative integer" : "a string"));
    }
    if (is_line) {
      frame_.line = v.number;
    } else {
      (frame_key_ == "filename" ? frame_.filename : frame_.name) = v.text;
    }
  }

  void begin_entry() {
    entry_ = entry{};
    entry_.line = *line_;
    entry_key_.clear();
  }

  void end_entry() {
    if (!entry_.has_action) builder_.fail(entry_.line, "entry without an 'action'");
    const bool is_alloc = entry_.action == "alloc";
    const bool is_free = entry_.action == "free_requested";
    if (!is_alloc && !is_free) {
      static constexpr std::array<std::string_view, 7> kIgnored = {
          "free_completed", "segment_alloc", "segment_free", "segment_map",
          "segment_unmap",  "snapshot",      "oom"};
      if (std::find(kIgnored.begin(), kIgnored.end(), entry_.action) == kIgnored.end()) {
        builder_.fail(entry_.line, "unknown action " + quote(entry_.action));
      }
      return;
    }
    // Devices are separate memories: the first device with events is replayed.
    if (used_device_ < 0) used_device_ = device_;
    if (device_ != used_device_) {
      const std::string label = std::to_string(device_);
      if (skipped_devices_.empty() || last_skipped_device_ != device_) {
        skipped_devices_ += (skipped_devices_.empty() ? "" : " ") + label;
        last_skipped_device_ = device_;
      }
      return;
    }
    if (!entry_.has_addr) builder_.fail(entry_.line, "entry without an 'addr'");
    if (is_alloc) {
      if (!entry_.has_size) builder_.fail(entry_.line, "alloc entry without a 'size'");
      builder_.allocate(entry_.addr, static_cast<std::size_t>(entry_.size),
                        entry_.has_stream ? std::string_view(entry_.stream) : "0", entry_.line,
                        builder_.intern_stack(std::move(entry_.frames), entry_.line));
    } else {
      builder_.free(entry_.addr, entry_.line);
    }
  }

  trace_data& trace_;
  trace_builder builder_;
  const std::uint64_t* line_;
  int depth_ = 0;
  int traces_depth_ = -1;  // depth of the device_traces list while inside it
  bool traces_done_ = false;
  bool in_frames_ = false;  // inside an entry's frames list
  std::string root_key_;
  std::string entry_key_;
  std::string frame_key_;
  entry entry_;
  frame frame_;
  int device_ = -1;
  int used_device_ = -1;
  int last_skipped_device_ = -1;
  std::string skipped_devices_;
};

void parse_pytorch(std::string_view text, trace_data& trace) {
  std::uint64_t line = 1;
  snapshot_reader reader(trace, &line);
  const line_counting_iterator first(text.data(), &line);
  const line_counting_iterator last(text.data() + text.size(), &line);
  nlohmann::json::sax_parse(first, last, &reader);
  reader.finish();
}

// The file name without its directory and trace extensions.
std::string name_from_path(const std::string& path) {
  std::string name = path.substr(path.find_last_of('/') + 1);
  for (bool stripped = true; stripped;) {
    stripped = false;
    for (const std::string_view extension : {".gz", ".csv", ".json", ".trace", ".log"}) {
      if (name.size() > extension.size() && name.ends_with(extension)) {
        name.resize(name.size() - extension.size());
        stripped = true;
      }
    }
  }
  return name;
}

// The whole file, decompressed when it is gzip, within io::input_file's bounds.
std::string read_file(const std::string& path) {
  io::whole_text file = io::read_whole_text(path, "a NUL byte: not a trace");
  if (file.cannot_open) throw trace_error(kRead + path + ": " + file.problem);
  if (!file.problem.empty()) fail_at(path, file.line, file.problem);
  return std::move(file.text);
}

}  // namespace

std::string_view to_string(format f) noexcept {
  switch (f) {
    case format::memkit:
      return "memkit";
    case format::rmm:
      return "rmm";
    case format::pytorch:
      return "pytorch";
  }
  return "unknown";
}

std::string_view trace_data::get_metadata(std::string_view key) const noexcept {
  for (const auto& [metadata_key, metadata_value] : metadata) {
    if (metadata_key == key) return metadata_value;
  }
  return {};
}

format detect_format(std::string_view text) noexcept {
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // a UTF-8 byte-order mark
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && (text[first] == '{' || text[first] == '[')) {
    return format::pytorch;
  }
  format found = format::memkit;
  bool decided = false;
  for_each_line(text, [&](std::uint64_t, std::string_view line) {
    line = trim(line);
    if (decided || line.empty() || line.front() == '#') return;
    found = line.starts_with("Thread,Time,Action") ? format::rmm : format::memkit;
    decided = true;
  });
  return found;
}

trace_data parse(std::string_view text, const std::string& path) {
  trace_data trace;
  trace.path = path;
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  trace.source_format = detect_format(text);
  step_key_lines step_lines;
  switch (trace.source_format) {
    case format::memkit:
      parse_memkit(text, trace, step_lines);
      break;
    case format::rmm:
      parse_rmm(text, trace, step_lines);
      break;
    case format::pytorch:
      parse_pytorch(text, trace);
      break;
  }
  check_steps(trace, step_lines);
  if (trace.events.empty()) {
    fail_at(path, static_cast<std::uint64_t>(std::count(text.begin(), text.end(), '\n')) + 1,
            "no allocation or free: an empty trace");
  }
  const std::string_view workload = trace.get_metadata("workload");
  trace.name = workload.empty() ? name_from_path(path) : std::string(workload);
  return trace;
}

trace_data read(const std::string& path) { return parse(read_file(path), path); }

const std::vector<frame>& trace_data::get_stack(std::uint64_t block) const noexcept {
  static const std::vector<frame> kNone;
  if (block >= block_stacks.size() || block_stacks[block] == 0) return kNone;
  return stacks[block_stacks[block] - 1];
}

std::size_t calculate_peak_live(const trace_data& trace) {
  live_bytes_counter live(trace);
  std::size_t peak = 0;
  for (const event& e : trace.events) peak = std::max(peak, live.count(e));
  return peak;
}

}  // namespace memkit::trace

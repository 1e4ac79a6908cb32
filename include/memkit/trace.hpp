// Allocation traces: what a program asked of its allocator, in order.
//
// Three formats are read, detected from the content (docs/TRACES.md):
//   memkit   gzip or plain CSV: `a,<id>,<size>,<stream>` / `f,<id>`, `# key: value`
//            metadata lines, `s` step markers (a loop iteration starts); ids name
//            live blocks. Optionally call stacks: `@<stack>,<file>,<line>,<function>`
//            lines, and an allocation's last field `@<stack>` naming its stack.
//   rmm      RMM's logging_resource_adaptor CSV: `Thread,Time,Action,Pointer,Size,Stream`,
//            actions allocate / free (`deallocate` accepted) / `allocate failure`
//            (skipped: nothing was handed out); pointers name live blocks.
//   pytorch  a torch.cuda.memory._snapshot() saved as JSON: the entries of its
//            `device_traces` with action `alloc` (and its `frames`) and
//            `free_requested`; the other actions (free_completed, segment_alloc, ...)
//            are the caching allocator's own and are ignored.
//
// Every format becomes one list of events over dense block numbers: allocation k
// (in trace order) is block k, so a replay can keep its addresses in a vector.
// Streams become dense numbers too, in order of first appearance.
//
// The readers check the trace as they go and throw trace_error, whose message names
// the file and line: "[memkit::trace::read] trace.csv:2: unknown action 'x'".
// Checked: malformed lines, unknown actions, a free of an unknown or already freed
// block, an allocation of a block that is live, a truncated or corrupt gzip stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "memkit/errors.hpp"

namespace memkit::trace {

// A trace that cannot be read; the message names the file and line.
class trace_error : public error {
 public:
  using error::error;
};

enum class format { memkit, rmm, pytorch };
std::string_view to_string(format f) noexcept;

enum class action : std::uint8_t { allocate, free };

struct event {
  action kind = action::allocate;
  std::uint32_t stream = 0;  // dense stream number (allocate only)
  std::uint64_t block = 0;   // dense block number: the allocation's ordinal
  std::size_t size = 0;      // requested bytes (allocate only)
  std::uint64_t line = 0;    // where the event is in the file, for messages
};

// One call frame of the stack that allocated a block.
struct frame {
  std::string filename;
  std::uint64_t line = 0;
  std::string name;  // the function
  friend bool operator==(const frame&, const frame&) = default;
};

// Allocations a trace may have (12x the largest real one known): the readers
// refuse more, naming the line, rather than spend minutes and GBs.
inline constexpr std::uint64_t kMaxAllocations = std::uint64_t{1} << 23;

struct trace_data {
  std::string path;  // as given
  std::string name;  // metadata `workload`, else the file name without extensions
  format source_format = format::memkit;
  std::vector<event> events;
  std::uint64_t allocations = 0;     // == number of blocks
  std::vector<std::string> streams;  // stream labels as written, by dense number
  std::vector<std::pair<std::string, std::string>> metadata;  // in file order
  // Loop iterations (docs/TRACES.md): metadata `steps`, else the number of step
  // markers; 0 when the trace gives neither.
  std::uint64_t steps = 0;
  // Metadata `warmup_steps` (< steps); without it 1 when the trace has step markers,
  // else 0.
  std::uint64_t warmup_steps = 0;
  // Step markers (`s` lines, memkit CSV): for each, in order, the index into events
  // of the first event after it (events.size() for a marker after the last event).
  std::vector<std::uint64_t> step_starts;
  // Call stacks, where the trace has them (PyTorch's frames, memkit's `@` lines):
  // distinct stacks, each innermost frame first, and for each block 1 + the index of
  // the stack that allocated it (0: none known). block_stacks is empty when no block
  // has a stack.
  std::vector<std::vector<frame>> stacks;
  std::vector<std::uint32_t> block_stacks;

  // The value of a metadata key, or empty.
  std::string_view get_metadata(std::string_view key) const noexcept;
  // The stack that allocated `block`, innermost frame first; empty when unknown.
  const std::vector<frame>& get_stack(std::uint64_t block) const noexcept;
};

// Stacks a trace may have (distinct ones) and frames in one stack: past these the
// readers stop with an error naming the line.
inline constexpr std::uint64_t kMaxStacks = std::uint64_t{1} << 22;
inline constexpr std::uint64_t kMaxFramesPerStack = 4096;

// Reads a trace file in any of the formats; gzip-compressed or not.
trace_data read(const std::string& path);
// Reads a trace from memory (already decompressed); `path` is only used in messages.
trace_data parse(std::string_view text, const std::string& path);
// The format of decompressed trace text.
format detect_format(std::string_view text) noexcept;

// The largest sum of requested bytes live at once: the physical floor.
std::size_t calculate_peak_live(const trace_data& trace);

// The trace's requested bytes live, followed through its events in order.
class live_bytes_counter {
 public:
  explicit live_bytes_counter(const trace_data& trace) : sizes_(trace.allocations) {}
  // Counts event e; returns the bytes live after it.
  std::size_t count(const event& e) {
    if (e.kind == action::allocate) {
      sizes_[e.block] = e.size;
      live_ += e.size;
    } else {
      live_ -= sizes_[e.block];
    }
    return live_;
  }

 private:
  std::vector<std::size_t> sizes_;  // requested bytes of each block seen allocated
  std::size_t live_ = 0;
};

}  // namespace memkit::trace

// Replays a trace through memkit's allocator and measures what it holds and costs.
//
// Every run builds a fresh backend and allocator, so runs are independent and, on the
// simulated device, deterministic: the same trace and options give the same layout.
// Streams become queues 0..n-1 in order of first appearance. The trace has no kernels:
// by default no fence is ever pending and a freed block is reusable on every queue at
// once. With device_lag > 0 (sim only) every event is a kernel on its stream that the
// simulated device finishes only device_lag events later on that stream, as when a
// host runs ahead of its GPU: frees are then pending, and waits are counted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "memkit/allocator.hpp"
#include "memkit/statistics.hpp"
#include "memkit/trace.hpp"

namespace memkit::trace {

enum class backend_kind { sim, cpu };

struct replay_options {
  backend_kind device = backend_kind::sim;
  std::size_t capacity = std::size_t{1} << 40;     // sim only; also the memory limit
  std::size_t granularity = std::size_t{2} << 20;  // sim only
  // The allocator's own settings default to allocator_options{}'s, so a replay with no
  // options runs the allocator as a program gets it (arena_slack 0 seeks the floor).
  pool_policy policy = allocator_options{}.policy;       // where large blocks live
  double arena_slack = allocator_options{}.arena_slack;  // allocator_options::arena_slack
  bool plan_loops = allocator_options{}.plan_loops;      // allocator_options::plan_loops
  // allocator_options::small_segments_in_arena
  bool small_segments_in_arena = allocator_options{}.small_segments_in_arena;
  bool order_queues = allocator_options{}.order_queues;  // allocator_options::order_queues
  bool validate = allocator_options{}.validate;  // check the invariants after every operation
  std::uint32_t device_lag = 0;  // sim only: events a stream's work finishes after it is issued
  std::uint64_t lag_seed = 0;    // with device_lag: 0 fixed; else each event's lag is drawn
                                 // from [0, device_lag] with this seed
  // At every step marker but the first, allocator::clear_cache(): a program that calls
  // torch.cuda.empty_cache() once a step.
  bool empty_cache_each_step = false;
  // Called every few thousand events with (events done, events in all).
  std::function<void(std::uint64_t, std::uint64_t)> progress;
};

struct replay_result {
  bool completed = false;               // false: out of memory at failed_line
  std::string failure;                  // the out_of_memory message
  std::uint64_t failed_line = 0;        // the trace line of the allocation that failed
  std::uint64_t events = 0;             // replayed
  std::uint64_t allocations = 0;        // allocate events replayed
  std::size_t peak_live_bytes = 0;      // from the trace: requested bytes live at once
  std::size_t peak_reserved_bytes = 0;  // the allocator's statistics
  std::size_t peak_active_bytes = 0;
  std::uint64_t backend_allocs = 0;
  std::uint64_t backend_frees = 0;
  std::uint64_t maps = 0;    // pages mapped (arena)
  std::uint64_t unmaps = 0;  // pages unmapped (arena)
  // With step markers (trace_data::step_starts) and a step after the warmup: pages
  // unmapped (and mapped) from the marker that starts step trace.warmup_steps to the end.
  bool has_unmaps_after_warmup = false;
  std::uint64_t unmaps_after_warmup = 0;
  std::uint64_t maps_after_warmup = 0;
  std::uint64_t moves_after_warmup = 0;    // pages moved (statistics::moves)
  std::uint64_t returns_after_warmup = 0;  // pages moved back at no cost (statistics::returns)
  // With step markers: pages unmapped in each step (the events before the first
  // marker count in the first step).
  std::vector<std::uint64_t> unmaps_by_step;
  std::uint64_t waits = 0;                 // sim only: waits on unfinished fences (host stalls)
  std::uint64_t simulated_backend_ns = 0;  // sim only: the device's modelled cost of those calls
  std::uint64_t simulated_backend_ns_after_warmup = 0;  // sim only: of it, from the warm-up's end
  std::uint64_t fences_recorded = 0;  // sim only: fences recorded on the device's queues
  std::uint64_t loop_ns = 0;          // wall time of the replay loop only
  double ns_per_event = 0;
  double ns_per_event_after_warmup = 0;  // the steady state: the steps after the warm-up
  statistics final_statistics;
  loop_report loop;  // the arena's loop plan at the end
};

// Runs the whole trace once. Throws trace_error naming the trace line when the
// allocator rejects an event outright (a block above the device's largest buffer), and
// when --backend cpu is asked for more memory than the machine has.
replay_result replay(const trace_data& trace, const replay_options& options);

// What the allocator did in a replay, in the terms of PyTorch's memory snapshots
// (docs/TRACES.md, "Writing PyTorch snapshots"): the trace's allocations and frees with
// the addresses the allocator gave, the segments it took from the device and gave back,
// the pages it mapped and unmapped, and the segments at the end.
struct history_event {
  enum class kinds : std::uint8_t {
    alloc,          // block, address, size (requested bytes), stream
    free,           // block, address, size (requested bytes), stream
    segment_alloc,  // address, size: allocate_segment
    segment_free,   // address, size: free_segment
    segment_map,    // address, size: pages mapped into the arena's range
    segment_unmap,  // address, size: pages unmapped
    oom,            // size: the request that found no memory (the last event)
  };
  kinds kind = kinds::alloc;
  std::uint32_t stream = 0;  // alloc, free: the trace's dense stream number
  std::uint64_t event = 0;   // the trace event during which it happened
  std::uint64_t block = 0;   // alloc, free: the trace's block number
  address_t address = 0;
  std::size_t size = 0;
  std::size_t block_size = 0;  // alloc, free: the allocator's block (the request rounded up)
  bool small = false;          // segment_alloc: a segment of the small-block pool
};
struct allocator_history {
  bool completed = true;     // false: out of memory at the last event (an oom entry)
  std::uint64_t events = 0;  // trace events replayed
  std::size_t capacity = 0;  // the device's
  std::size_t reserved = 0;  // at the end
  std::vector<history_event> entries;
  std::vector<segment_view> segments;  // at the end, by address
  std::vector<bool> segment_in_range;  // per segment: pages of the arena's range (not a segment)
  // Blocks of the trace live at the end, by address: (address, block number).
  std::vector<std::pair<address_t, std::uint64_t>> live_blocks;
};

// What the HTML report draws.
struct replay_observation {
  bool completed = true;         // false: the run ended in out of memory
  std::uint64_t events = 0;      // replayed
  std::uint64_t peak_event = 0;  // index of the event after which reserved first peaked
  std::uint64_t peak_line = 0;
  std::size_t peak_reserved_bytes = 0;
  std::size_t live_at_peak_bytes = 0;
  allocator_history history;  // every block's address and size, the segments over time
  // Reserved bytes after each event where they changed: (event index, bytes).
  std::vector<std::pair<std::uint64_t, std::size_t>> reserved_changes;
};

// Replays the trace watching every event (not timed) and recording its history.
replay_observation observe(const trace_data& trace, const replay_options& options);

// Replays the trace recording the history (not timed). Blocks of 0 bytes get no
// address and are left out.
allocator_history record_history(const trace_data& trace, const replay_options& options);

// Where the reserved bytes lie at their peak (memkit replay --at-peak): in the small
// pool's segments, or elsewhere (the arena's mapped pages, or large segments), each with
// the allocator's live blocks there; elsewhere split further by pages (of the device's
// granularity) that no live block touches and the free bytes of pages one does.
//   reserved_bytes == small_segment_bytes + other_bytes
//   other_bytes == other_block_bytes + partial_page_bytes + untouched_page_bytes
struct peak_breakdown {
  std::uint64_t event = 0;  // index of the event after which reserved first peaked
  std::uint64_t line = 0;   // its trace line
  std::uint64_t step = 0;   // step markers before it (0: none, or before the first)
  std::size_t reserved_bytes = 0;
  std::size_t live_bytes = 0;            // the trace's requested bytes live then
  std::size_t small_segment_bytes = 0;   // the small pool's segments
  std::size_t small_block_bytes = 0;     // live blocks in them
  std::size_t other_bytes = 0;           // the rest of reserved_bytes
  std::size_t other_block_bytes = 0;     // live blocks there
  std::size_t partial_page_bytes = 0;    // free bytes of pages a live block touches
  std::size_t untouched_page_bytes = 0;  // pages no live block touches (idle, free)
};

// Replays the trace (not timed) and breaks the reserved bytes down at the event after
// which they first peaked; a run that ran out of memory, at its peak until then.
peak_breakdown calculate_peak_breakdown(const trace_data& trace, const replay_options& options);

struct min_capacity_result {
  std::size_t min_capacity_bytes = 0;  // the smallest capacity, in MiB steps, that ran
  std::size_t failed_below_bytes = 0;  // min_capacity_bytes - 1 MiB: known to fail
  std::uint32_t probes = 0;            // replays run
};

// Bisection over the simulated capacity (and the memory limit with it), to 1 MiB,
// between peak live (below it nothing can run) and the unconstrained peak reserved.
// Invariant: the lower end fails, the upper end runs. The answer is a capacity that
// runs with the one 1 MiB below failing; a smaller one might run too, since a tighter
// limit changes when the allocator releases and reorganises (see docs/TRACES.md).
min_capacity_result find_min_capacity(const trace_data& trace, const replay_options& options,
                                      std::size_t peak_live_bytes,
                                      std::size_t unconstrained_peak_reserved_bytes,
                                      const std::function<void(std::uint32_t probe, std::size_t low,
                                                               std::size_t high)>& on_probe = {});

}  // namespace memkit::trace

#include "memkit/replay.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <unordered_set>

#include "memkit/backends/cpu.hpp"
#include "memkit/backends/sim.hpp"
#include "memkit/errors.hpp"

namespace memkit::trace {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::uint64_t kProgressEvery = 4096;

std::string mib(std::size_t bytes) { return std::to_string((bytes + kMiB / 2) / kMiB) + " MiB"; }

// Between the allocator and the device (the memory interface is all the allocator
// uses): notes the segments it holds and gives back, and, told by the allocator, the
// pages that hold memory in its arena (a page that moved may stay mapped where it
// was: the device's map calls are not the memory held), for record_history, until
// the replay takes them.
class watched_backend final : public forwarded_memory, public page_listener {
 public:
  explicit watched_backend(backend& device) : forwarded_memory(device) {}

  std::vector<history_event>& get_pending() noexcept { return pending_; }

  address_t allocate_segment(std::size_t bytes) override {
    const address_t address = upstream_.allocate_segment(bytes);
    if (address != 0) note(history_event::kinds::segment_alloc, address, bytes);
    return address;
  }
  void free_segment(address_t address, std::size_t bytes) override {
    note(history_event::kinds::segment_free, address, bytes);
    upstream_.free_segment(address, bytes);
  }
  void on_pages(address_t at, std::size_t bytes, bool held) override {
    note(held ? history_event::kinds::segment_map : history_event::kinds::segment_unmap, at, bytes);
  }

 private:
  void note(history_event::kinds kind, address_t address, std::size_t bytes) {
    history_event entry;
    entry.kind = kind;
    entry.address = address;
    entry.size = bytes;
    pending_.push_back(entry);
  }

  std::vector<history_event> pending_;
};

struct replay_setup {
  std::unique_ptr<backend> device;
  std::unique_ptr<watched_backend> watcher;  // between the allocator and the device, when asked
  sim_backend* sim = nullptr;  // the device when simulated and lagging: events submit work
  std::uint32_t lag = 0;       // events after which an event's work completes (the most, seeded)
  bool seeded = false;         // each event's lag drawn from [0, lag]
  std::mt19937_64 lags;
  // Per queue, the events that submitted its work, in order: work completes `lag`
  // events after it was issued, counted over every queue (a side stream with little
  // work still completes it in time).
  // Each with the fence value it got (a queue's device-side waits, order_after, are
  // work on it too: the values skip them).
  struct submission {
    std::uint64_t event;
    std::uint64_t value;
  };
  std::vector<std::vector<submission>> submitted_at;
  std::unique_ptr<allocator> memory;
  std::vector<queue_id> queue_of_stream;
  // replay_options::empty_cache_each_step: the events before which the cache is
  // emptied (the step starts but the first), and the next of them.
  std::vector<std::uint64_t> clear_cache_at;
  std::size_t next_clear = 0;
};

replay_setup make_setup(const trace_data& trace, const replay_options& options,
                        std::size_t peak_live_bytes, bool watched = false) {
  replay_setup setup;
  allocator_options allocator_settings;
  allocator_settings.validate = options.validate;
  allocator_settings.policy = options.policy;
  allocator_settings.arena_slack = options.arena_slack;
  allocator_settings.plan_loops = options.plan_loops;
  allocator_settings.small_segments_in_arena = options.small_segments_in_arena;
  allocator_settings.order_queues = options.order_queues;
  if (options.device == backend_kind::sim) {
    sim_options sim_settings;
    sim_settings.capacity = options.capacity;
    sim_settings.granularity = options.granularity;
    sim_settings.queue_count =
        std::max<std::uint32_t>(4, static_cast<std::uint32_t>(trace.streams.size()));
    auto sim = std::make_unique<sim_backend>(sim_settings);
    if (options.device_lag > 0) {
      setup.sim = sim.get();
      setup.lag = options.device_lag;
      setup.seeded = options.lag_seed != 0;
      setup.lags.seed(options.lag_seed);
    }
    setup.device = std::move(sim);
    allocator_settings.memory_limit = options.capacity;
  } else {
    setup.device = std::make_unique<cpu_backend>();
    const std::size_t machine_bytes = setup.device->get_facts().capacity;
    if (peak_live_bytes > machine_bytes) {
      throw trace_error("[memkit::trace::replay] " + trace.path + ": needs " +
                        mib(peak_live_bytes) + " live at its peak; this machine has " +
                        mib(machine_bytes) + " (replay it on --backend sim)");
    }
  }
  if (watched) {
    setup.watcher = std::make_unique<watched_backend>(*setup.device);
    allocator_settings.pages = setup.watcher.get();
  }
  setup.memory = std::make_unique<allocator>(
      watched ? static_cast<backend&>(*setup.watcher) : *setup.device, allocator_settings);
  // Streams beyond the device's queues share queues round-robin.
  const std::uint32_t queue_count =
      std::max<std::uint32_t>(1, setup.device->get_facts().queue_count);
  for (std::size_t stream = 0; stream < trace.streams.size(); ++stream) {
    setup.queue_of_stream.push_back(static_cast<queue_id>(stream % queue_count));
  }
  if (setup.queue_of_stream.empty()) setup.queue_of_stream.push_back(0);
  if (options.empty_cache_each_step && trace.step_starts.size() > 1)
    setup.clear_cache_at.assign(trace.step_starts.begin() + 1, trace.step_starts.end());
  return setup;
}

// Replays events [first, stop) and calls after_event(index) after each; returns the
// index it stopped at (stop when all ran). An out_of_memory stops the run and is
// recorded in `result`. With kKeepSizes, block_sizes[block] gets each block's size.
template <bool kKeepSizes = false, class AfterEvent>
std::uint64_t run_events(const trace_data& trace, replay_setup& setup,
                         std::vector<address_t>& addresses, std::uint64_t first, std::uint64_t stop,
                         replay_result& result, AfterEvent&& after_event,
                         std::vector<std::size_t>* block_sizes = nullptr) {
  allocator& memory = *setup.memory;
  const event* events = trace.events.data();
  // A request above the device's largest buffer is bad input to the allocator; to a
  // replay it is a device too small, as any out-of-memory (exit 2, with a report).
  const std::size_t largest = memory.get_backend().get_facts().max_buffer;
  std::uint64_t index = first;
  try {
    for (; index < stop; ++index) {
      const event& e = events[index];
      const queue_id queue = setup.queue_of_stream[e.stream];
      while (setup.next_clear < setup.clear_cache_at.size() &&
             setup.clear_cache_at[setup.next_clear] <= index) {
        memory.clear_cache();
        ++setup.next_clear;
      }
      if (e.kind == action::allocate) {
        if (e.size > largest) [[unlikely]] {
          result.completed = false;
          result.failure = "[memkit::trace::replay] a request of " + std::to_string(e.size) +
                           " bytes is larger than the device's largest buffer (" +
                           std::to_string(largest) + " bytes)";
          result.failed_line = e.line;
          return index;
        }
        const allocation block = memory.allocate(e.size, queue);
        addresses[e.block] = block.address;
        if constexpr (kKeepSizes) (*block_sizes)[e.block] = block.size;
      } else {
        memory.free(addresses[e.block]);
      }
      if (setup.sim) {
        if (setup.submitted_at.size() <= queue) setup.submitted_at.resize(queue + 1);
        setup.submitted_at[queue].push_back({index, setup.sim->submit(queue)});
        const std::uint64_t lag =
            setup.seeded ? setup.lags() % (std::uint64_t{setup.lag} + 1) : setup.lag;
        if (index >= lag) {
          for (queue_id q = 0; q < setup.submitted_at.size(); ++q) {
            const std::vector<replay_setup::submission>& at = setup.submitted_at[q];
            const auto done =
                std::upper_bound(at.begin(), at.end(), index - lag,
                                 [](std::uint64_t event, const replay_setup::submission& s) {
                                   return event < s.event;
                                 });
            if (done != at.begin()) setup.sim->complete(q, std::prev(done)->value);
          }
        }
      }
      after_event(index);
    }
  } catch (const out_of_memory& error) {
    result.completed = false;
    result.failure = error.what();
    result.failed_line = events[index].line;
    return index;
  } catch (const invalid_argument& error) {
    throw trace_error("[memkit::trace::replay] " + trace.path + ":" +
                      std::to_string(events[index].line) + ": " + error.what());
  }
  result.completed = true;
  return index;
}

}  // namespace

replay_result replay(const trace_data& trace, const replay_options& options) {
  replay_result result;
  result.peak_live_bytes = calculate_peak_live(trace);
  replay_setup setup = make_setup(trace, options, result.peak_live_bytes);
  std::vector<address_t> addresses(trace.allocations);
  const std::uint64_t total = trace.events.size();
  // With step markers the run pauses where each step starts, to read the unmaps so
  // far (one statistics read a step).
  std::vector<std::uint64_t> pauses;
  for (std::size_t k = 1; k < trace.step_starts.size(); ++k)
    pauses.push_back(std::min<std::uint64_t>(trace.step_starts[k], total));
  pauses.push_back(total);
  const bool after_warmup = trace.step_starts.size() > trace.warmup_steps;
  statistics at_warmup;
  std::uint64_t events_at_warmup = 0;
  std::chrono::steady_clock::time_point warmup_end;
  const auto run = [&](std::uint64_t first, std::uint64_t stop) {
    if (options.progress) {
      const auto& progress = options.progress;
      return run_events(trace, setup, addresses, first, stop, result, [&](std::uint64_t index) {
        if ((index + 1) % kProgressEvery == 0) progress(index + 1, total);
      });
    }
    return run_events(trace, setup, addresses, first, stop, result, [](std::uint64_t) {});
  };

  const auto* sim = dynamic_cast<const sim_backend*>(setup.device.get());
  std::uint64_t simulated_at_warmup = 0;
  const auto start = std::chrono::steady_clock::now();
  std::uint64_t unmaps_before = 0;
  for (std::size_t k = 0; k < pauses.size(); ++k) {
    if (after_warmup && k == trace.warmup_steps) {
      at_warmup = setup.memory->get_statistics();
      events_at_warmup = result.events;
      warmup_end = std::chrono::steady_clock::now();
      if (sim) simulated_at_warmup = sim->get_counters().simulated_ns;
    }
    result.events = run(result.events, std::max(result.events, pauses[k]));
    if (!result.completed) break;
    if (!trace.step_starts.empty()) {
      const std::uint64_t unmaps = setup.memory->get_statistics().unmaps;
      result.unmaps_by_step.push_back(unmaps - unmaps_before);
      unmaps_before = unmaps;
    }
  }
  const auto stop = std::chrono::steady_clock::now();
  if (options.progress) options.progress(result.events, total);

  result.loop_ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(stop - start).count());
  result.ns_per_event =
      result.events > 0 ? static_cast<double>(result.loop_ns) / static_cast<double>(result.events)
                        : 0.0;
  for (std::uint64_t i = 0; i < result.events; ++i) {
    if (trace.events[i].kind == action::allocate) ++result.allocations;
  }
  result.final_statistics = setup.memory->get_statistics();
  result.loop = setup.memory->get_loop_report();
  result.peak_reserved_bytes = result.final_statistics.peak_reserved_bytes;
  result.peak_active_bytes = result.final_statistics.peak_active_bytes;
  result.backend_allocs = result.final_statistics.backend_allocations;
  result.backend_frees = result.final_statistics.backend_frees;
  result.maps = result.final_statistics.maps;
  result.unmaps = result.final_statistics.unmaps;
  if (after_warmup && result.completed) {
    result.has_unmaps_after_warmup = true;
    result.unmaps_after_warmup = result.unmaps - at_warmup.unmaps;
    result.maps_after_warmup = result.maps - at_warmup.maps;
    result.moves_after_warmup = result.final_statistics.moves - at_warmup.moves;
    result.returns_after_warmup = result.final_statistics.returns - at_warmup.returns;
    const std::uint64_t events = result.events - events_at_warmup;
    if (events > 0) {
      result.ns_per_event_after_warmup =
          static_cast<double>(
              std::chrono::duration_cast<std::chrono::nanoseconds>(stop - warmup_end).count()) /
          static_cast<double>(events);
    }
  }
  if (sim) {
    result.simulated_backend_ns = sim->get_counters().simulated_ns;
    if (result.has_unmaps_after_warmup)
      result.simulated_backend_ns_after_warmup = result.simulated_backend_ns - simulated_at_warmup;
    result.fences_recorded = sim->get_counters().fences_recorded;
    result.waits = sim->get_counters().unfinished_waits;
  }
  return result;
}

namespace {

// Builds an allocator_history from a replay on a watched device, event by event.
class history_recorder {
 public:
  history_recorder(const trace_data& trace, replay_setup& setup, allocator_history& history)
      : trace_(trace),
        setup_(setup),
        history_(history),
        pending_(setup.watcher->get_pending()),
        addresses_(trace.allocations),
        block_sizes_(trace.allocations),
        requested_(trace.allocations),
        streams_(trace.allocations),
        live_(trace.allocations) {}

  // Replays events [0, stop), recording each, then calling after_event(index).
  template <class AfterEvent>
  replay_result run(std::uint64_t stop, AfterEvent&& after_event) {
    replay_result result;
    history_.events = run_events<true>(
        trace_, setup_, addresses_, 0, stop, result,
        [&](std::uint64_t index) {
          record(index);
          after_event(index);
        },
        &block_sizes_);
    finish(result);
    return result;
  }

 private:
  void record(std::uint64_t index) {
    const event& e = trace_.events[index];
    history_event entry;
    entry.event = index;
    entry.block = e.block;
    entry.address = addresses_[e.block];
    if (e.kind == action::allocate) {
      take_pending(index);  // a segment comes before the blocks in it
      live_[e.block] = true;
      requested_[e.block] = e.size;
      streams_[e.block] = e.stream;
      if (e.size == 0) return;  // no address
      entry.kind = history_event::kinds::alloc;
      entry.stream = e.stream;
      entry.size = e.size;
      entry.block_size = block_sizes_[e.block];
      history_.entries.push_back(entry);
    } else {
      live_[e.block] = false;
      if (requested_[e.block] != 0) {
        entry.kind = history_event::kinds::free;
        entry.stream = streams_[e.block];  // the trace's frees name none: the allocation's
        entry.size = requested_[e.block];
        entry.block_size = block_sizes_[e.block];
        history_.entries.push_back(entry);
      }
      take_pending(index);  // a segment goes after the blocks in it
    }
  }

  // Moves the device's calls made during event `index` into the history; new segments
  // are looked up in the allocator's pools to say whether they are small.
  void take_pending(std::uint64_t index) {
    if (pending_.empty()) return;
    const std::size_t first = history_.entries.size();
    bool new_segment = false;
    for (history_event& entry : pending_) {
      entry.event = index;
      new_segment = new_segment || entry.kind == history_event::kinds::segment_alloc;
      history_.entries.push_back(entry);
    }
    pending_.clear();
    if (!new_segment) return;
    const std::vector<segment_view> views = setup_.memory->calculate_segments();
    for (std::size_t i = first; i < history_.entries.size(); ++i) {
      history_event& entry = history_.entries[i];
      if (entry.kind != history_event::kinds::segment_alloc) continue;
      const auto it = std::lower_bound(
          views.begin(), views.end(), entry.address,
          [](const segment_view& view, address_t address) { return view.base < address; });
      entry.small = it != views.end() && it->base == entry.address && it->small;
    }
  }

  void finish(const replay_result& result) {
    const std::uint64_t total = trace_.events.size();
    history_.completed = result.completed;
    if (!result.completed) {
      take_pending(history_.events);
      history_event entry;
      entry.kind = history_event::kinds::oom;
      entry.event = history_.events;
      entry.size = history_.events < total ? trace_.events[history_.events].size : 0;
      history_.entries.push_back(entry);
    }
    // Segments from allocate_segment still held, to tell them from the range's pages.
    std::unordered_set<address_t> segment_bases;
    for (const history_event& entry : history_.entries) {
      if (entry.kind == history_event::kinds::segment_alloc) segment_bases.insert(entry.address);
      if (entry.kind == history_event::kinds::segment_free) segment_bases.erase(entry.address);
    }
    history_.segments = setup_.memory->calculate_segments();
    for (const segment_view& segment : history_.segments) {
      history_.segment_in_range.push_back(!segment_bases.contains(segment.base));
    }
    for (std::uint64_t block = 0; block < trace_.allocations; ++block) {
      if (live_[block] && requested_[block] != 0) {
        history_.live_blocks.emplace_back(addresses_[block], block);
      }
    }
    std::sort(history_.live_blocks.begin(), history_.live_blocks.end());
    history_.capacity = setup_.device->get_facts().capacity;
    history_.reserved = setup_.memory->get_statistics().reserved_bytes;
  }

  const trace_data& trace_;
  replay_setup& setup_;
  allocator_history& history_;
  std::vector<history_event>& pending_;
  std::vector<address_t> addresses_;
  std::vector<std::size_t> block_sizes_;
  std::vector<std::size_t> requested_;
  std::vector<std::uint32_t> streams_;
  std::vector<bool> live_;
};

}  // namespace

replay_observation observe(const trace_data& trace, const replay_options& options) {
  replay_observation observation;
  const std::uint64_t total = trace.events.size();
  live_bytes_counter live_bytes(trace);
  std::size_t last_reserved = 0;
  replay_setup setup = make_setup(trace, options, calculate_peak_live(trace), true);
  const allocator& memory = *setup.memory;
  history_recorder recorder(trace, setup, observation.history);
  const replay_result result = recorder.run(total, [&](std::uint64_t index) {
    const event& e = trace.events[index];
    const std::size_t live = live_bytes.count(e);
    const std::size_t reserved = memory.get_statistics().reserved_bytes;
    if (reserved != last_reserved) {
      observation.reserved_changes.emplace_back(index, reserved);
      last_reserved = reserved;
    }
    if (reserved > observation.peak_reserved_bytes) {
      observation.peak_reserved_bytes = reserved;
      observation.peak_event = index;
      observation.peak_line = e.line;
      observation.live_at_peak_bytes = live;
    }
    if (options.progress && (index + 1) % kProgressEvery == 0) options.progress(index + 1, total);
  });
  // A run that stopped early (out of memory) still shows what happened up to there.
  observation.completed = result.completed;
  observation.events = observation.history.events;
  return observation;
}

namespace {

// The breakdown of what the allocator reserves now (see peak_breakdown).
void break_down(const allocator& memory, peak_breakdown& out) {
  const std::size_t page = std::max<std::size_t>(memory.get_backend().get_facts().granularity, 1);
  out.reserved_bytes = memory.get_statistics().reserved_bytes;
  out.small_segment_bytes = out.small_block_bytes = out.other_bytes = 0;
  out.other_block_bytes = out.partial_page_bytes = out.untouched_page_bytes = 0;
  for (const segment_view& view : memory.calculate_segments()) {
    std::size_t live = 0;
    std::size_t touched = 0;    // pages of the view a live block touches
    std::size_t next_page = 0;  // blocks come by address: pages below are counted
    for (const block_view& b : view.blocks) {
      if (!b.live || b.size == 0) continue;
      live += b.size;
      const std::size_t first_page = std::max(b.offset / page, next_page);
      const std::size_t end_page = (b.offset + b.size - 1) / page + 1;
      if (end_page > first_page) touched += end_page - first_page;
      next_page = std::max(next_page, end_page);
    }
    if (view.small) {
      out.small_segment_bytes += view.size;
      out.small_block_bytes += live;
      continue;
    }
    const std::size_t touched_bytes = std::min(view.size, touched * page);
    out.other_bytes += view.size;
    out.other_block_bytes += live;
    out.partial_page_bytes += touched_bytes - std::min(touched_bytes, live);
    out.untouched_page_bytes += view.size - touched_bytes;
  }
}

}  // namespace

peak_breakdown calculate_peak_breakdown(const trace_data& trace, const replay_options& options) {
  peak_breakdown found;
  replay_setup setup = make_setup(trace, options, calculate_peak_live(trace));
  std::vector<address_t> addresses(trace.allocations);
  live_bytes_counter live_bytes(trace);
  replay_result result;
  const allocator& memory = *setup.memory;
  // Reserved bytes grow by whole segments and pages: a new peak comes at most once a
  // page, and each is broken down as it comes (the last one stands).
  run_events(trace, setup, addresses, 0, trace.events.size(), result, [&](std::uint64_t index) {
    const event& e = trace.events[index];
    const std::size_t live = live_bytes.count(e);
    if (memory.get_statistics().reserved_bytes <= found.reserved_bytes) return;
    break_down(memory, found);
    found.event = index;
    found.line = e.line;
    found.live_bytes = live;
    found.step = static_cast<std::uint64_t>(
        std::upper_bound(trace.step_starts.begin(), trace.step_starts.end(), index) -
        trace.step_starts.begin());
  });
  return found;
}

allocator_history record_history(const trace_data& trace, const replay_options& options) {
  allocator_history history;
  replay_setup setup = make_setup(trace, options, calculate_peak_live(trace), true);
  history_recorder(trace, setup, history).run(trace.events.size(), [](std::uint64_t) {});
  return history;
}
min_capacity_result find_min_capacity(
    const trace_data& trace, const replay_options& options, std::size_t peak_live_bytes,
    std::size_t unconstrained_peak_reserved_bytes,
    const std::function<void(std::uint32_t, std::size_t, std::size_t)>& on_probe) {
  min_capacity_result found;
  replay_options probe_options = options;
  probe_options.device = backend_kind::sim;
  probe_options.progress = {};
  const auto runs = [&](std::size_t capacity) {
    probe_options.capacity = capacity;
    ++found.probes;
    replay_result result;
    replay_setup setup = make_setup(trace, probe_options, peak_live_bytes);
    std::vector<address_t> addresses(trace.allocations);
    run_events(trace, setup, addresses, 0, trace.events.size(), result, [](std::uint64_t) {});
    return result.completed;
  };
  if (peak_live_bytes == 0) return found;  // nothing is ever live: any capacity runs

  // In MiB steps: `low` fails (it is below peak live), `high` runs.
  std::size_t low = (peak_live_bytes - 1) / kMiB;
  std::size_t high = std::max(low + 1, (unconstrained_peak_reserved_bytes + kMiB - 1) / kMiB);
  while (!runs(high * kMiB)) {
    // The unconstrained peak should always run; if a tight limit made it fail, widen.
    if (high * kMiB >= options.capacity) {
      throw trace_error("[memkit::trace::find_min_capacity] " + trace.path +
                        ": the trace does not run even at " + mib(high * kMiB));
    }
    low = high;
    high = std::min(high * 2, options.capacity / kMiB);
  }
  while (high - low > 1) {
    const std::size_t middle = low + (high - low) / 2;
    if (on_probe) on_probe(found.probes, low * kMiB, high * kMiB);
    if (runs(middle * kMiB)) {
      high = middle;
    } else {
      low = middle;
    }
  }
  found.min_capacity_bytes = high * kMiB;
  found.failed_below_bytes = low * kMiB;
  return found;
}

}  // namespace memkit::trace

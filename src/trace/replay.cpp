#include "memkit/replay.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <random>
#include <string>

#include "memkit/backends/cpu.hpp"
#include "memkit/backends/sim.hpp"
#include "memkit/errors.hpp"

namespace memkit::trace {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::uint64_t kProgressEvery = 4096;

std::string mib(std::size_t bytes) { return std::to_string((bytes + kMiB / 2) / kMiB) + " MiB"; }

struct replay_setup {
  std::unique_ptr<backend> device;
  sim_backend* sim = nullptr;  // the device when simulated and lagging: events submit work
  std::uint32_t lag = 0;       // events after which an event's work completes (the most, seeded)
  bool seeded = false;         // each event's lag drawn from [0, lag]
  std::mt19937_64 lags;
  std::unique_ptr<allocator> memory;
  std::vector<queue_id> queue_of_stream;
};

replay_setup make_setup(const trace_data& trace, const replay_options& options,
                        std::size_t peak_live_bytes) {
  replay_setup setup;
  allocator_options allocator_settings;
  allocator_settings.validate = options.validate;
  allocator_settings.policy = options.policy;
  allocator_settings.arena_slack = options.arena_slack;
  allocator_settings.plan_loops = options.plan_loops;
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
  setup.memory = std::make_unique<allocator>(*setup.device, allocator_settings);
  // Streams beyond the device's queues share queues round-robin.
  const std::uint32_t queue_count =
      std::max<std::uint32_t>(1, setup.device->get_facts().queue_count);
  for (std::size_t stream = 0; stream < trace.streams.size(); ++stream) {
    setup.queue_of_stream.push_back(static_cast<queue_id>(stream % queue_count));
  }
  if (setup.queue_of_stream.empty()) setup.queue_of_stream.push_back(0);
  return setup;
}

// Replays events [first, stop) and calls after_event(index) after each; returns the
// index it stopped at (stop when all ran). An out_of_memory stops the run and is
// recorded in `result`.
template <class AfterEvent>
std::uint64_t run_events(const trace_data& trace, replay_setup& setup,
                         std::vector<address_t>& addresses, std::uint64_t first, std::uint64_t stop,
                         replay_result& result, AfterEvent&& after_event) {
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
      if (e.kind == action::allocate) {
        if (e.size > largest) [[unlikely]] {
          result.completed = false;
          result.failure = "[memkit::trace::replay] a request of " + std::to_string(e.size) +
                           " bytes is larger than the device's largest buffer (" +
                           std::to_string(largest) + " bytes)";
          result.failed_line = e.line;
          return index;
        }
        addresses[e.block] = memory.allocate(e.size, queue).address;
      } else {
        memory.free(addresses[e.block]);
      }
      if (setup.sim) {
        const std::uint64_t work = setup.sim->submit(queue);
        const std::uint64_t lag =
            setup.seeded ? setup.lags() % (std::uint64_t{setup.lag} + 1) : setup.lag;
        if (work > lag) setup.sim->complete(queue, work - lag);
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
  // With step markers the run pauses where the first step after the warmup starts, to
  // read the unmaps so far.
  const bool after_warmup = trace.step_starts.size() > trace.warmup_steps;
  const std::uint64_t pause =
      after_warmup ? std::min<std::uint64_t>(trace.step_starts[trace.warmup_steps], total) : total;
  std::uint64_t unmaps_at_pause = 0;
  const auto run = [&](std::uint64_t first, std::uint64_t stop) {
    if (options.progress) {
      const auto& progress = options.progress;
      return run_events(trace, setup, addresses, first, stop, result, [&](std::uint64_t index) {
        if ((index + 1) % kProgressEvery == 0) progress(index + 1, total);
      });
    }
    return run_events(trace, setup, addresses, first, stop, result, [](std::uint64_t) {});
  };

  const auto start = std::chrono::steady_clock::now();
  result.events = run(0, pause);
  if (result.completed && pause < total) {
    unmaps_at_pause = setup.memory->get_statistics().unmaps;
    result.events = run(pause, total);
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
  result.peak_reserved_bytes = result.final_statistics.peak_reserved_bytes;
  result.peak_active_bytes = result.final_statistics.peak_active_bytes;
  result.backend_allocs = result.final_statistics.backend_allocations;
  result.backend_frees = result.final_statistics.backend_frees;
  result.maps = result.final_statistics.maps;
  result.unmaps = result.final_statistics.unmaps;
  if (after_warmup && result.completed) {
    result.has_unmaps_after_warmup = true;
    result.unmaps_after_warmup = result.unmaps - unmaps_at_pause;
  }
  if (const auto* sim = dynamic_cast<const sim_backend*>(setup.device.get())) {
    result.simulated_backend_ns = sim->get_counters().simulated_ns;
    result.waits = sim->get_counters().unfinished_waits;
  }
  return result;
}

replay_observation observe(const trace_data& trace, const replay_options& options,
                           std::size_t max_samples) {
  replay_observation observation;
  const std::size_t peak_live_bytes = calculate_peak_live(trace);
  const std::uint64_t total = trace.events.size();
  const std::uint64_t window =
      std::max<std::uint64_t>(1, (total + max_samples - 1) / std::max<std::size_t>(1, max_samples));

  std::vector<std::size_t> sizes(trace.allocations);
  std::size_t live = 0;
  timeline_sample sample;
  replay_result result;
  std::uint64_t events_run = 0;
  {
    replay_setup setup = make_setup(trace, options, peak_live_bytes);
    std::vector<address_t> addresses(trace.allocations);
    const allocator& memory = *setup.memory;
    events_run = run_events(trace, setup, addresses, 0, total, result, [&](std::uint64_t index) {
      const event& e = trace.events[index];
      if (e.kind == action::allocate) {
        sizes[e.block] = e.size;
        live += e.size;
      } else {
        live -= sizes[e.block];
      }
      const std::size_t reserved = memory.get_statistics().reserved_bytes;
      if (reserved > observation.peak_reserved_bytes) {
        observation.peak_reserved_bytes = reserved;
        observation.peak_event = index;
        observation.peak_line = e.line;
        observation.live_at_peak_bytes = live;
      }
      sample.live_bytes = std::max(sample.live_bytes, live);
      sample.reserved_bytes = std::max(sample.reserved_bytes, reserved);
      if ((index + 1) % window == 0 || index + 1 == total) {
        sample.event = index;
        observation.timeline.push_back(sample);
        sample = {};
      }
      if (options.progress && (index + 1) % kProgressEvery == 0) options.progress(index + 1, total);
    });
  }
  // A run that stopped early (out of memory) still shows what happened up to there.
  observation.completed = result.completed;
  observation.events = events_run;
  if (events_run > 0 &&
      (observation.timeline.empty() || observation.timeline.back().event + 1 != events_run)) {
    sample.event = events_run - 1;
    observation.timeline.push_back(sample);
  }
  if (observation.peak_reserved_bytes > 0) {
    replay_setup setup = make_setup(trace, options, peak_live_bytes);
    std::vector<address_t> addresses(trace.allocations);
    replay_result prefix;
    run_events(trace, setup, addresses, 0, observation.peak_event + 1, prefix,
               [](std::uint64_t) {});
    observation.segments_at_peak = setup.memory->calculate_segments();
  }
  return observation;
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

// memkit replay TRACE...: replays allocation traces through the allocator and reports
// peak live and reserved bytes, backend calls, host cost, and optionally the smallest
// capacity the trace runs in (docs/TRACES.md).
//
// Exit status: 0 every trace replayed; 1 bad input (unreadable or malformed trace, bad
// option); 2 a trace ran out of memory at the capacity given.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "memkit/pytorch_snapshot.hpp"
#include "memkit/replay.hpp"
#include "memkit/report_html.hpp"
#include "memkit/trace.hpp"
#include "output_file.hpp"
#include "reports/reports.hpp"

namespace memkit::tools {
namespace {

using memkit::trace::backend_kind;
using reports::metadata_bytes;
using reports::per_step;
using reports::ratio;

// The allocator's settings default to trace::replay_options{}'s, which are
// allocator_options{}'s: with no flags, replay runs the allocator as a program gets it.
struct replay_settings {
  std::vector<std::string> paths;
  std::string backend_name = "sim";
  std::string policy_name = reports::policy_name(trace::replay_options{}.policy);
  std::string capacity_text = "1TiB";
  std::string granularity_text = "2MiB";
  double arena_slack = trace::replay_options{}.arena_slack;
  bool plan_loops = trace::replay_options{}.plan_loops;
  bool small_segments_in_arena = trace::replay_options{}.small_segments_in_arena;
  bool order_queues = trace::replay_options{}.order_queues;
  std::uint32_t device_lag = 0;
  std::uint64_t lag_seed = 0;
  bool empty_cache_each_step = false;
  bool min_capacity = false;
  bool at_peak = false;
  bool json = false;
  bool validate = false;
  std::string html_path;
  std::string snapshot_path;
};

// "80GiB", "512 MiB", "2M", "1048576": bytes.
std::size_t parse_size(const std::string& text, const char* option) {
  const auto bad = [&]() {
    return CLI::ValidationError(
        option, "expected a size such as 80GiB, 512MiB or 1048576, got '" + text + "'");
  };
  std::size_t used = 0;
  double number = 0;
  try {
    number = std::stod(text, &used);
  } catch (const std::exception&) {
    throw bad();
  }
  std::string unit = text.substr(used);
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  double scale = 1;
  if (unit.empty() || unit == "B") {
    scale = 1;
  } else if (unit == "K" || unit == "KB" || unit == "KiB") {
    scale = 1024.0;
  } else if (unit == "M" || unit == "MB" || unit == "MiB") {
    scale = 1024.0 * 1024;
  } else if (unit == "G" || unit == "GB" || unit == "GiB") {
    scale = 1024.0 * 1024 * 1024;
  } else if (unit == "T" || unit == "TB" || unit == "TiB") {
    scale = 1024.0 * 1024 * 1024 * 1024;
  } else {
    throw bad();
  }
  const double bytes = number * scale;
  if (!(bytes >= 1) || bytes > 1e18) throw bad();
  return static_cast<std::size_t>(std::llround(bytes));
}

// A one-line bar on stderr, drawn only when stderr is a terminal and the work has
// already taken a second, at most ten times a second.
class progress_bar {
 public:
  explicit progress_bar(std::string label)
      : label_(std::move(label)),
        enabled_(isatty(STDERR_FILENO) == 1),
        start_(std::chrono::steady_clock::now()) {}
  ~progress_bar() { finish(); }
  progress_bar(const progress_bar&) = delete;
  progress_bar& operator=(const progress_bar&) = delete;

  void update(double fraction, const std::string& detail = "") {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - start_ < std::chrono::seconds(1)) return;
    if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    drawn_ = true;
    constexpr int kWidth = 30;
    fraction = std::min(1.0, std::max(0.0, fraction));
    const int filled = static_cast<int>(fraction * kWidth);
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.append(static_cast<std::size_t>(kWidth - filled), '.');
    std::fprintf(stderr, "\r\033[K%s [%s] %3.0f%% %s", label_.c_str(), bar.c_str(), fraction * 100,
                 detail.c_str());
    std::fflush(stderr);
  }
  void finish() {
    if (drawn_) std::fprintf(stderr, "\r\033[K");
    drawn_ = false;
  }

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

// Text from the input for the terminal: control bytes (escape sequences) shown as '?'.
std::string printable(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if ((c >= 0 && c < 32) || c == 127) c = '?';
  }
  return out;
}

std::string mib(std::size_t bytes) {
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buffer;
}

// A size in the largest binary unit it reaches: "1 TiB", "2 MiB", "1.5 GiB".
std::string binary_size(std::size_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
  static constexpr const char* kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char buffer[48];
  std::snprintf(
      buffer, sizeof buffer,
      value == static_cast<double>(static_cast<std::uint64_t>(value)) ? "%.0f %s" : "%.1f %s",
      value, kUnits[unit]);
  return buffer;
}

void print_table(const trace::report_section& section) {
  const trace::trace_data& trace = *section.trace;
  const trace::replay_result& result = section.result;
  const auto line = [](const char* label, const std::string& value) {
    std::printf("  %-24s %s\n", label, value.c_str());
  };
  const auto times_live = [&](std::size_t bytes) {
    char buffer[96];
    std::snprintf(buffer, sizeof buffer, "%-14s %.3f x live", mib(bytes).c_str(),
                  ratio(bytes, result.peak_live_bytes));
    return std::string(buffer);
  };
  std::printf("%s (%s, %s format)\n", printable(trace.name).c_str(), printable(trace.path).c_str(),
              std::string(trace::to_string(trace.source_format)).c_str());
  line("events", std::to_string(result.events) + " (" + std::to_string(result.allocations) +
                     " allocations, " + std::to_string(trace.streams.size()) + " stream" +
                     (trace.streams.size() == 1 ? "" : "s") + ")");
  std::string device = "cpu (host memory)";
  if (section.options.device == backend_kind::sim) {
    device = "sim, capacity " + binary_size(section.options.capacity) + ", granularity " +
             binary_size(section.options.granularity);
    if (section.options.device_lag > 0) {
      device += ", " + std::to_string(section.options.device_lag) +
                (section.options.lag_seed ? " events behind at most" : " events behind");
    }
  }
  char slack[48];
  std::snprintf(slack, sizeof slack, ", arena slack %g", section.options.arena_slack);
  line("device", device + ", policy " + reports::policy_name(section.options.policy) + slack +
                     (section.options.empty_cache_each_step ? ", cache emptied each step" : ""));
  if (!result.completed) {
    line("OUT OF MEMORY", "at trace line " + std::to_string(result.failed_line));
    line("", result.failure);
  }
  if (result.completed) {
    line("peak live", mib(result.peak_live_bytes));
    line("peak reserved", times_live(result.peak_reserved_bytes));
  } else {
    // The run stopped before the trace's peak: a ratio to it would mean nothing.
    line("peak live", mib(result.peak_live_bytes) + " (the whole trace's; not reached)");
    line("peak reserved", mib(result.peak_reserved_bytes) + " (until the failure)");
  }
  if (section.at_peak) {
    const trace::peak_breakdown& p = *section.at_peak;
    line("at peak reserved", "line " + std::to_string(p.line) + ", step " + std::to_string(p.step) +
                                 ": " + mib(p.reserved_bytes) + " for " + mib(p.live_bytes) +
                                 " live");
    line("", "small segments " + mib(p.small_segment_bytes) + " (" + mib(p.small_block_bytes) +
                 " in live blocks)");
    line("", "elsewhere " + mib(p.other_bytes) + " (" + mib(p.other_block_bytes) +
                 " in live blocks, " + mib(p.partial_page_bytes) + " free on pages they touch, " +
                 mib(p.untouched_page_bytes) + " on pages none touches)");
  }
  if (section.min_capacity) {
    line("min capacity", times_live(section.min_capacity->min_capacity_bytes) + "  (" +
                             std::to_string(section.min_capacity->probes) + " replays)");
  }
  line("backend calls",
       std::to_string(result.backend_allocs) + " allocs, " + std::to_string(result.backend_frees) +
           " frees" +
           (result.maps + result.unmaps > 0 ? ", " + std::to_string(result.maps) + " maps, " +
                                                  std::to_string(result.unmaps) + " unmaps"
                                            : std::string()) +
           (section.options.device_lag > 0
                ? ", " + std::to_string(result.waits) + " waits on unfinished work"
                : std::string()));
  if (trace.steps > 0 && result.completed) {
    char steps[160];
    std::snprintf(steps, sizeof steps, "%llu (warmup %llu): %.1f maps, %.1f unmaps per step",
                  static_cast<unsigned long long>(trace.steps),
                  static_cast<unsigned long long>(trace.warmup_steps),
                  per_step(result.maps, trace.steps), per_step(result.unmaps, trace.steps));
    std::string text = steps;
    if (result.has_unmaps_after_warmup) {
      const std::uint64_t after = trace.step_starts.size() - trace.warmup_steps;
      std::snprintf(steps, sizeof steps, "; %.1f unmaps per step after the warmup",
                    per_step(result.unmaps_after_warmup, after));
      text += steps;
      if (section.options.device == backend_kind::sim) {
        std::snprintf(steps, sizeof steps, " (device calls %.2f ms a step, modelled)",
                      per_step(result.simulated_backend_ns_after_warmup, after) / 1e6);
        text += steps;
      }
    }
    line("steps", text);
  }
  const statistics& final_counts = result.final_statistics;
  if (final_counts.moves + final_counts.returns > 0) {
    line("page moves", std::to_string(final_counts.moves) + " (a map each, no unmap), " +
                           std::to_string(final_counts.returns) +
                           " back where still mapped (no call)");
  }
  const loop_report& loop = result.loop;
  if (loop.plans + loop.declined > 0) {
    auto over = [](std::size_t height, std::size_t load) {
      char ratio[32];
      std::snprintf(
          ratio, sizeof ratio, "%.4f x",
          static_cast<double>(height) / static_cast<double>(std::max<std::size_t>(load, 1)));
      return std::string(ratio);
    };
    std::string text = loop.period > 0
                           ? std::to_string(loop.period) + " requests a repetition, LOAD " +
                                 mib(loop.load_bytes) + ", plan " +
                                 over(loop.height_bytes, loop.load_bytes) + " LOAD"
                           : std::string("none at the end");
    text += "; " + std::to_string(loop.plans) + " made (" + std::to_string(loop.searches) +
            " searched), " + std::to_string(loop.declined) + " declined";
    if (loop.declined > 0) {
      text += " (the lowest " + over(loop.declined_height_bytes, loop.declined_load_bytes) +
              " its LOAD)";
    }
    text += ", " + std::to_string(loop.revivals) + " brought back, " + std::to_string(loop.losses) +
            " lost; " + std::to_string(loop.placed) + " requests placed as planned, " +
            std::to_string(loop.missed) + " not";
    line("loop plans", text);
  }
  char cost[96];
  std::snprintf(cost, sizeof cost, "%.0f ns/event (%.2f ms for the replay loop)",
                result.ns_per_event, static_cast<double>(result.loop_ns) / 1e6);
  line("host cost", cost);
  const auto reserved = metadata_bytes(trace, "pytorch_peak_reserved");
  const auto allocated = metadata_bytes(trace, "pytorch_peak_allocated");
  if (reserved) line("PyTorch peak reserved", times_live(*reserved) + "  (recorded)");
  if (allocated) line("PyTorch peak allocated", times_live(*allocated) + "  (recorded)");
  std::printf("\n");
}

void run_replay(const replay_settings& settings) {
  if (!settings.html_path.empty()) {
    check_not_an_input(settings.html_path, settings.paths, "memkit::tools::replay");
  }
  if (!settings.snapshot_path.empty()) {
    check_not_an_input(settings.snapshot_path, settings.paths, "memkit::tools::replay");
  }
  trace::replay_options options;
  if (settings.backend_name == "cpu") {
    options.device = backend_kind::cpu;
    if (settings.min_capacity) {
      throw CLI::ValidationError("--min-capacity", "needs the simulated device (--backend sim)");
    }
  }
  options.capacity = parse_size(settings.capacity_text, "--capacity");
  options.granularity = parse_size(settings.granularity_text, "--granularity");
  options.validate = settings.validate;
  options.arena_slack = settings.arena_slack;
  options.plan_loops = settings.plan_loops;
  options.small_segments_in_arena = settings.small_segments_in_arena;
  options.order_queues = settings.order_queues;
  options.device_lag = settings.device_lag;
  options.lag_seed = settings.lag_seed;
  options.empty_cache_each_step = settings.empty_cache_each_step;
  if (settings.device_lag > 0 && options.device != backend_kind::sim) {
    throw CLI::ValidationError("--device-lag", "needs the simulated device (--backend sim)");
  }
  options.policy = settings.policy_name == "segments" ? pool_policy::segments
                   : settings.policy_name == "arena"  ? pool_policy::arena
                                                      : pool_policy::automatic;

  // Read every trace first: a bad one stops the run before any replay starts.
  std::vector<std::unique_ptr<trace::trace_data>> traces;
  for (const std::string& path : settings.paths) {
    traces.push_back(std::make_unique<trace::trace_data>(trace::read(path)));
  }

  std::vector<trace::report_section> sections;
  bool out_of_memory = false;
  for (const auto& trace : traces) {
    trace::report_section section;
    section.trace = trace.get();
    section.options = options;
    {
      progress_bar bar("replay " + printable(trace->name));
      trace::replay_options timed = options;
      timed.progress = [&bar](std::uint64_t done, std::uint64_t total) {
        bar.update(static_cast<double>(done) /
                   static_cast<double>(std::max<std::uint64_t>(1, total)));
      };
      section.result = trace::replay(*trace, timed);
    }
    out_of_memory = out_of_memory || !section.result.completed;
    if (settings.min_capacity && section.result.completed) {
      progress_bar bar("min capacity " + printable(trace->name));
      const double expected_probes =
          std::log2(std::max(2.0, static_cast<double>(section.result.peak_reserved_bytes -
                                                      section.result.peak_live_bytes) /
                                      (1 << 20))) +
          2;
      section.min_capacity = trace::find_min_capacity(
          *trace, options, section.result.peak_live_bytes, section.result.peak_reserved_bytes,
          [&](std::uint32_t probe, std::size_t low, std::size_t high) {
            bar.update(probe / expected_probes, mib(low) + " .. " + mib(high));
          });
    }
    if (settings.at_peak) {
      progress_bar bar("at peak " + printable(trace->name));
      section.at_peak = trace::calculate_peak_breakdown(*trace, options);
    }
    if (!settings.html_path.empty()) {
      progress_bar bar("report " + printable(trace->name));
      trace::replay_options watched = options;
      watched.progress = [&bar](std::uint64_t done, std::uint64_t total) {
        bar.update(static_cast<double>(done) /
                   static_cast<double>(std::max<std::uint64_t>(1, total)));
      };
      section.observation = trace::observe(*trace, watched);
    }
    sections.push_back(std::move(section));
  }

  if (settings.json) {
    // One trace: one object; several: an array of them, in the order given.
    nlohmann::json out = nlohmann::json::array();
    for (const auto& section : sections) out.push_back(reports::replay_json(section));
    std::printf("%s\n", (sections.size() == 1 ? out[0] : out)
                            .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
                            .c_str());
  } else {
    for (const auto& section : sections) print_table(section);
  }
  if (!settings.html_path.empty()) {
    write_whole_file(settings.html_path, trace::render_html(sections), "memkit::tools::replay");
    if (!settings.json) std::printf("report: %s\n", settings.html_path.c_str());
  }
  if (!settings.snapshot_path.empty()) {
    // Trace i is device i of the snapshot.
    std::vector<trace::allocator_history> histories;
    histories.reserve(traces.size());
    for (const auto& trace : traces) {
      progress_bar bar("snapshot " + printable(trace->name));
      histories.push_back(trace::record_history(*trace, options));
    }
    std::vector<trace::snapshot_device> devices;
    for (std::size_t i = 0; i < traces.size(); ++i)
      devices.push_back({traces[i].get(), &histories[i]});
    write_whole_file(settings.snapshot_path, trace::write_pytorch_snapshot(devices),
                     "memkit::tools::replay");
    if (!settings.json) std::printf("snapshot: %s\n", settings.snapshot_path.c_str());
  }
  if (out_of_memory) throw CLI::RuntimeError(2);
}

}  // namespace

void add_replay_command(CLI::App& app) {
  auto settings = std::make_shared<replay_settings>();
  CLI::App* command = app.add_subcommand(
      "replay", "Replay allocation traces (memkit CSV, RMM log, PyTorch snapshot JSON)");
  command->add_option("traces", settings->paths, "trace files (gzip or plain)")->required();
  command->add_option("--backend", settings->backend_name, "sim (simulated device) or cpu")
      ->check(CLI::IsMember({"sim", "cpu"}))
      ->capture_default_str();
  command
      ->add_option("--policy", settings->policy_name,
                   "where large blocks live: automatic (arena where the device has virtual "
                   "memory), segments or arena")
      ->check(CLI::IsMember({"automatic", "segments", "arena"}))
      ->capture_default_str();
  command
      ->add_option("--capacity", settings->capacity_text,
                   "simulated device capacity and memory limit, e.g. 80GiB")
      ->capture_default_str();
  command
      ->add_option("--granularity", settings->granularity_text,
                   "simulated device segment granularity, e.g. 2MiB")
      ->capture_default_str();
  command
      ->add_option("--arena-slack", settings->arena_slack,
                   "how far reserved may grow over the peak in use before the arena moves idle "
                   "pages (default: the allocator's own, 0.02 = 2%); 0 seeks the floor")
      ->check(kFiniteNumber & CLI::Range(0.0, 10.0))
      ->capture_default_str();
  command
      ->add_option("--plan-loops", settings->plan_loops,
                   "arena: learn a repeating loop and place its blocks from a plan of one "
                   "repetition (default: the allocator's own, true); false places every block "
                   "online")
      ->capture_default_str();
  command
      ->add_option("--small-segments-in-arena", settings->small_segments_in_arena,
                   "arena: the small pool's segments are pages of the arena, apart from the "
                   "large blocks (default: the allocator's own, false)")
      ->capture_default_str();
  command
      ->add_option("--order-queues", settings->order_queues,
                   "sim: before growing, order a stream after the others' pending frees (a "
                   "device-side wait) and reuse their blocks at once (default: the allocator's "
                   "own, true); false reuses another stream's free only once its fence completes")
      ->capture_default_str();
  command
      ->add_option("--device-lag", settings->device_lag,
                   "sim only: the device finishes each event's work this many events after it is "
                   "issued on its stream, as when the host runs ahead of the GPU (0: at once)")
      ->capture_default_str();
  command->add_option("--lag-seed", settings->lag_seed,
                      "with --device-lag: draw each event's lag from 0 to the lag with this seed "
                      "(0: every event lags the same)");
  command->add_flag("--empty-cache-each-step", settings->empty_cache_each_step,
                    "give every cached byte back at each step marker but the first, as a "
                    "program that calls torch.cuda.empty_cache() once a step");
  command->add_flag("--min-capacity", settings->min_capacity,
                    "also find the smallest capacity (1 MiB steps) the trace runs in");
  command->add_flag("--at-peak", settings->at_peak,
                    "also break the reserved bytes down at their peak: small segments, live "
                    "blocks, partly used and untouched pages");
  command->add_flag("--json", settings->json, "print JSON (an array for several traces)");
  command->add_option("--html", settings->html_path, "write a self-contained HTML report");
  command->add_option("--pytorch-snapshot", settings->snapshot_path,
                      "write the replay as a PyTorch memory snapshot (a pickle that "
                      "torch.cuda._memory_viz opens; trace i is device i)");
  command->add_flag("--validate", settings->validate,
                    "check the allocator's invariants after every operation (slow)");
  command->callback([settings]() { run_printing_errors([&] { run_replay(*settings); }); });
}

}  // namespace memkit::tools

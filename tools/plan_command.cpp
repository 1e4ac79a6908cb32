// `memkit plan`: static offsets for a whole schedule of buffers (memkit/planner.hpp).
//
//   memkit plan INSTANCE.csv [--capacity BYTES] [--time-limit SECONDS] [--output PLAN.csv]
//               [--json] [--minimize]
//   memkit plan --from-trace TRACE [...]
//
// Exit status: 0 with a plan; 1 when the input cannot be read; 2 when no plan within
// --capacity was found in the time limit; 3 if the plan failed validation (a bug).
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>

#include "commands.hpp"
#include "memkit/planner.hpp"
#include "output_file.hpp"
#include "reports/reports.hpp"

namespace memkit::tools {
namespace {

struct plan_settings {
  std::string instance_path;
  std::string trace_path;
  std::optional<std::int64_t> capacity;
  double time_limit_seconds = 10.0;
  std::string output_path;
  bool json = false;
  bool minimize = false;
};

// 1234567 -> "1,234,567": byte counts are easier to compare with separators.
std::string with_commas(std::int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  for (std::ptrdiff_t at = static_cast<std::ptrdiff_t>(digits.size()) - 3; at > 0; at -= 3) {
    digits.insert(static_cast<std::size_t>(at), ",");
  }
  return value < 0 ? "-" + digits : digits;
}

void run_plan(const plan_settings& settings) {
  const bool from_trace = !settings.trace_path.empty();
  if (from_trace == !settings.instance_path.empty()) {
    std::fprintf(stderr, "memkit plan: give either an INSTANCE.csv or --from-trace TRACE\n");
    throw CLI::RuntimeError(1);
  }
  const std::string& source = from_trace ? settings.trace_path : settings.instance_path;
  if (!settings.output_path.empty()) {
    try {
      check_not_an_input(settings.output_path, {source}, "memkit::tools::plan");
    } catch (const std::runtime_error& e) {
      std::fprintf(stderr, "%s\n", e.what());
      throw CLI::RuntimeError(1);
    }
  }
  planner::instance inst;
  try {
    inst = from_trace ? planner::instance_from_trace(settings.trace_path)
                      : planner::read_instance(settings.instance_path);
  } catch (const planner::planner_error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    throw CLI::RuntimeError(1);
  }

  planner::options opts;
  opts.capacity = settings.capacity;
  opts.time_limit_seconds = settings.time_limit_seconds;
  opts.minimize_within_capacity = settings.minimize;
  const planner::result res = planner::solve(inst, opts);

  // solve() checks every plan it keeps; check again against what is promised here.
  const planner::validation check = planner::validate(inst, res.best, settings.capacity);
  const bool fits = res.fits;
  if (fits && !check) {
    std::fprintf(stderr, "memkit plan: internal error, the plan is invalid: %s\n",
                 check.message.c_str());
    throw CLI::RuntimeError(3);
  }
  const bool write_file = fits && !settings.output_path.empty();
  if (write_file) {
    try {
      std::ostringstream text;
      planner::write_plan(text, inst, res.best);
      write_whole_file(settings.output_path, text.str(), "memkit::tools::plan");
    } catch (const std::runtime_error& e) {
      std::fprintf(stderr, "%s\n", e.what());
      throw CLI::RuntimeError(1);
    }
  }

  if (settings.json) {
    const nlohmann::json out = reports::plan_json(
        {.source = source,
         .from_trace = from_trace,
         .buffers = inst.buffers.size(),
         .result = &res,
         .capacity = settings.capacity,
         .time_limit_seconds = settings.time_limit_seconds,
         .fits = fits,
         .output = write_file ? std::optional(settings.output_path) : std::nullopt});
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::printf("source   %s: %zu buffers\n", source.c_str(), inst.buffers.size());
    std::printf("LOAD     %s bytes\n", with_commas(res.load_bytes).c_str());
    std::printf("greedy   %s bytes (%.4f x LOAD)\n", with_commas(res.greedy_height_bytes).c_str(),
                reports::height_over_load(res.greedy_height_bytes, res.load_bytes));
    std::printf("plan     %s bytes (%.4f x LOAD%s)", with_commas(res.height_bytes).c_str(),
                reports::height_over_load(res.height_bytes, res.load_bytes),
                res.optimal ? ", optimal" : "");
    if (settings.capacity) {
      std::printf(" %s capacity %s", fits ? "within" : "above",
                  with_commas(*settings.capacity).c_str());
    }
    std::printf("\ntime     %.3f s, %llu search nodes, %zu parts\n", res.seconds,
                static_cast<unsigned long long>(res.nodes), res.parts);
    if (write_file) std::printf("wrote    %s\n", settings.output_path.c_str());
  }
  if (!fits) {
    std::fprintf(stderr,
                 "memkit plan: no plan within capacity %s bytes found in %.1f s (best %s bytes, "
                 "LOAD %s bytes)%s\n",
                 with_commas(*settings.capacity).c_str(), settings.time_limit_seconds,
                 with_commas(res.height_bytes).c_str(), with_commas(res.load_bytes).c_str(),
                 res.load_bytes > *settings.capacity ? ": LOAD alone exceeds the capacity" : "");
    throw CLI::RuntimeError(2);
  }
}

}  // namespace

// A height the planner can hold: a whole number from 1 to 2^62 (CLI11 would turn a
// larger one into 2^63 - 1 without a word).
const CLI::Validator kPlanBytes(
    [](std::string& text) -> std::string {
      std::int64_t value = 0;
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (error == std::errc() && end == text.data() + text.size() && value >= 1 &&
          value <= planner::kMaxTotalBytes)
        return {};
      return "'" + text + "' is not a whole number of bytes from 1 to 2^62";
    },
    "BYTES");

void add_plan_command(CLI::App& app) {
  auto settings = std::make_shared<plan_settings>();
  CLI::App* command = app.add_subcommand(
      "plan",
      "Assign static offsets to a whole schedule of buffers (id, lower, upper, size), as low as "
      "LOAD: the most bytes live at one moment, which no plan can go below");
  command->add_option(
      "instance", settings->instance_path,
      "Instance CSV with the header id,lower,upper,size (lifetimes [lower, upper))");
  command->add_option("--from-trace", settings->trace_path,
                      "Plan a memkit allocation trace instead (time = event index)");
  command
      ->add_option("--capacity", settings->capacity,
                   "Find a plan whose height is at most this many bytes, or exit 2")
      ->check(kPlanBytes);
  command->add_option("--time-limit", settings->time_limit_seconds, "Seconds of search at most")
      ->check(kFiniteNumber & CLI::NonNegativeNumber)
      ->capture_default_str();
  command->add_option("--output", settings->output_path,
                      "Write the plan here as id,lower,upper,size,offset");
  command->add_flag("--json", settings->json, "Print one JSON object instead of a summary");
  command->add_flag("--minimize", settings->minimize,
                    "With --capacity, keep lowering the plan after one fits");
  command->callback([settings] { run_plan(*settings); });
}

}  // namespace memkit::tools

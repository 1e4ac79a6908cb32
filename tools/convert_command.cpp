// memkit convert TRACE OUTPUT: any trace format replay reads (memkit CSV, RMM log,
// PyTorch snapshot as JSON) written as memkit's CSV, with the call stacks the input
// has (docs/TRACES.md).
//
// Exit status: 0 written; 1 bad input or an output that cannot be written.
#include <cstdio>
#include <memory>
#include <string>

#include "commands.hpp"
#include "memkit/trace.hpp"
#include "memkit/write_csv.hpp"
#include "output_file.hpp"

namespace memkit::tools {
namespace {

struct convert_settings {
  std::string input;
  std::string output;
};

void run_convert(const convert_settings& settings) {
  check_not_an_input(settings.output, {settings.input}, "memkit::tools::convert");
  const trace::trace_data trace = trace::read(settings.input);
  write_whole_file(settings.output, trace::write_memkit_csv(trace), "memkit::tools::convert");
  std::printf("%s: %zu events (%llu allocations, %zu call stacks) -> %s\n", settings.input.c_str(),
              trace.events.size(), static_cast<unsigned long long>(trace.allocations),
              trace.stacks.size(), settings.output.c_str());
}

}  // namespace

void add_convert_command(CLI::App& app) {
  auto settings = std::make_shared<convert_settings>();
  CLI::App* command = app.add_subcommand(
      "convert",
      "Write a trace (memkit CSV, RMM log, PyTorch snapshot JSON) as memkit CSV, call stacks kept");
  command->add_option("trace", settings->input, "trace file (gzip or plain)")->required();
  command->add_option("output", settings->output, "the memkit CSV to write (plain text)")
      ->required();
  command->callback([settings]() { run_printing_errors([&] { run_convert(*settings); }); });
}

}  // namespace memkit::tools

// Each memkit subcommand lives in its own file and registers itself here.
#pragma once
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>

namespace memkit::tools {

// Each function adds one subcommand to `app`; the subcommand's callback runs it
// and throws CLI::RuntimeError(code) to exit non-zero.
void add_demo_command(CLI::App& app);     // tools/demo_command.cpp
void add_replay_command(CLI::App& app);   // tools/replay_command.cpp
void add_plan_command(CLI::App& app);     // tools/plan_command.cpp
void add_convert_command(CLI::App& app);  // tools/convert_command.cpp

// Runs a subcommand: an error it throws (other than CLI11's own) is printed and the
// program exits 1.
template <class Run>
void run_printing_errors(Run&& run) {
  try {
    run();
  } catch (const CLI::Error&) {
    throw;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s\n", error.what());
    throw CLI::RuntimeError(1);
  }
}

// A finite number: CLI11's ranges let "nan" through (every comparison with it fails).
inline const CLI::Validator kFiniteNumber(
    [](std::string& text) -> std::string {
      try {
        std::size_t used = 0;
        const double value = std::stod(text, &used);
        if (used == text.size() && std::isfinite(value)) return {};
      } catch (const std::exception&) {
      }
      return "'" + text + "' is not a finite number";
    },
    "FINITE");

}  // namespace memkit::tools

// Each memkit subcommand lives in its own file and registers itself here.
#pragma once
#include <CLI/CLI.hpp>
#include <cmath>
#include <string>

namespace memkit::tools {

// Each function adds one subcommand to `app`; the subcommand's callback runs it
// and throws CLI::RuntimeError(code) to exit non-zero.
void add_demo_command(CLI::App& app);     // tools/demo_command.cpp
void add_replay_command(CLI::App& app);   // tools/replay_command.cpp
void add_plan_command(CLI::App& app);     // tools/plan_command.cpp
void add_convert_command(CLI::App& app);  // tools/convert_command.cpp

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

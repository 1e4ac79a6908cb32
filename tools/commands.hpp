// Each memkit subcommand lives in its own file and registers itself here.
#pragma once
#include <CLI/CLI.hpp>

namespace memkit::tools {

// Each function adds one subcommand to `app`; the subcommand's callback runs it
// and throws CLI::RuntimeError(code) to exit non-zero.
void add_demo_command(CLI::App& app);    // tools/demo_command.cpp
void add_replay_command(CLI::App& app);  // tools/replay_command.cpp
void add_plan_command(CLI::App& app);    // tools/plan_command.cpp

}  // namespace memkit::tools

// memkit: the command-line tool. Subcommands are registered from tools/*_command.cpp.
#include <cstdio>
#include <exception>
#include <string>

#include "commands.hpp"
#include "memkit/version.hpp"

int main(int argc, char** argv) {
  CLI::App app{"memkit: a device-memory manager for array and tensor frameworks"};
  app.set_version_flag("--version", std::string("memkit ") + memkit::version_string);
  app.require_subcommand(1);
  memkit::tools::add_demo_command(app);
  memkit::tools::add_replay_command(app);
  memkit::tools::add_plan_command(app);
  memkit::tools::add_convert_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();  // a command's own status (2: out of memory, ...)
  } catch (const CLI::RequiredError& e) {
    // No command found: name what was given instead of only asking for a command.
    if (argc > 1 && app.get_subcommands().empty()) {
      std::string commands;
      for (const CLI::App* command : app.get_subcommands({}))
        commands += (commands.empty() ? "" : ", ") + command->get_name();
      std::fprintf(stderr, "[memkit] '%s' is not a command; the commands are %s (memkit --help)\n",
                   argv[1], commands.c_str());
      return 1;
    }
    return app.exit(e) == 0 ? 0 : 1;
  } catch (const CLI::ParseError& e) {
    // --help exits 0; every bad option or argument exits 1, as documented.
    return app.exit(e) == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}

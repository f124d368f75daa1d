// The `warden` command: subcommands over the warden library.
//
// main() owns the things every subcommand shares: parsing, --help, --version, and the
// translation of failures into one stderr line and an exit status (exit_codes.h).
// Subcommands register themselves below with one call each.

#include <CLI/CLI.hpp>
#include <exception>
#include <string>

#include "cli/bench_command.h"
#include "cli/commands.h"
#include "cli/elect_command.h"
#include "cli/engine_modules.h"
#include "cli/exit_codes.h"
#include "cli/failure.h"
#include "cli/leader_command.h"
#include "cli/run_command.h"
#include "cli/server_command.h"
#include "cli/status_command.h"
#include "cli/torture_command.h"
#include "warden/error.h"
#include "warden/version.h"

namespace {

using warden::cli::print_diagnostic;

// The deepest subcommand the parse reached, for a "see warden run --help" hint.
std::string help_hint(const CLI::App& root) {
  std::string path = "warden";
  const CLI::App* app = &root;
  for (bool descended = true; descended;) {
    descended = false;
    for (const CLI::App* sub : app->get_subcommands()) {
      path += " " + sub->get_name();
      app = sub;
      descended = true;
      break;
    }
  }
  return "see " + path + " --help";
}

}  // namespace

int main(int argc, char** argv) {
  namespace cli = warden::cli;
  // Before anything opens a Client: the engines beyond mem:// and warden:// come from the
  // modules the installed engine packages put beside this program, each loaded when a
  // URI first needs it (engine_modules.h).
  cli::use_engine_modules();

  CLI::App app("warden: distributed locks with fencing tokens", "warden");
  app.set_version_flag("--version", "warden " WARDEN_VERSION_STRING, "Print the version and exit");
  app.require_subcommand(1);
  app.footer(std::string(cli::kTopLevelExitHelp));

  cli::Commands commands(app);
  cli::add_run_command(commands);
  cli::add_server_command(commands);
  cli::add_status_command(commands);
  cli::add_elect_command(commands);
  cli::add_leader_command(commands);
  cli::add_bench_command(commands);
  cli::add_torture_command(commands);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version arrive as "errors" with status 0; CLI11 prints them.
    if (e.get_exit_code() == 0) return app.exit(e);
    // CLI11 reports "warden bogus" as a missing subcommand; name the word instead.
    if (app.get_subcommands().empty() && argc > 1 && argv[1][0] != '-') {
      print_diagnostic("usage: unknown subcommand \"" + cli::printable(argv[1]) + "\" (" +
                       help_hint(app) + ")");
      return cli::exit_code::kUsage;
    }
    print_diagnostic("usage: " + std::string(e.what()) + " (" + help_hint(app) + ")");
    return cli::exit_code::kUsage;
  }

  try {
    return commands.run_chosen();
  } catch (const cli::Failure& f) {
    print_diagnostic(f.what());
    return f.exit_code();
  } catch (const warden::Error& e) {
    print_diagnostic(e.what());
    return cli::exit_code_for(e.code());
  } catch (const std::exception& e) {
    print_diagnostic(std::string("internal error: ") + e.what());
    return cli::exit_code::kInternal;
  }
}

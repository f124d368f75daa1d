#include "cli/commands.h"

#include "cli/exit_codes.h"
#include "cli/failure.h"

namespace warden::cli {

CLI::App& Commands::add(const std::string& name, const std::string& description, Action action) {
  CLI::App* app = root_.add_subcommand(name, description);
  entries_.push_back({app, std::move(action)});
  return *app;
}

int Commands::run_chosen() const {
  for (const Entry& entry : entries_) {
    if (entry.app->parsed()) return entry.action();
  }
  // The root App requires a subcommand, so parsing fails before we get here.
  throw Failure(exit_code::kUsage, "usage", "no subcommand given (see warden --help)");
}

}  // namespace warden::cli

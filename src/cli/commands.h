// cli/commands.h — the subcommands of `warden` and how one is added.
//
// A subcommand is one file pair (e.g. run_command.{h,cc}) exposing
//
//   void add_run_command(Commands& commands);
//
// which declares the subcommand and its options on the CLI::App that add() returns and
// hands over the action to run when the subcommand is chosen. main() makes one call per
// subcommand; nothing else needs to change to add one.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace warden::cli {

// Runs a chosen subcommand after parsing; returns the process exit status, or throws
// Failure (or warden::Error) to exit with one line on stderr.
using Action = std::function<int()>;

class Commands {
 public:
  // Subcommands are added to `root`, which must outlive this object.
  explicit Commands(CLI::App& root) : root_(root) {}

  // Adds subcommand `name` with the one-line `description` shown in `warden --help`.
  // The caller declares its options on the returned App (owned by the root App) and
  // puts whatever the options write into state that `action` shares.
  CLI::App& add(const std::string& name, const std::string& description, Action action);

  // After a successful parse: runs the chosen subcommand's action and returns its
  // status. Precondition: a subcommand was chosen (the root requires one).
  int run_chosen() const;

 private:
  struct Entry {
    CLI::App* app;
    Action action;
  };
  CLI::App& root_;
  std::vector<Entry> entries_;
};

}  // namespace warden::cli

// cli/failure.h — how a subcommand gives up: one line for stderr and an exit status.
//
// Subcommands throw Failure; main() prints "warden: <what>: <why>" and exits with its
// code. Library errors are turned into Failures where the context ("what") is known,
// so the line names the step that failed as well as the library's reason.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "cli/exit_codes.h"
#include "warden/error.h"

namespace warden::cli {

class Failure : public std::runtime_error {
 public:
  // `what` names the step or the input ("--ttl", "acquire g/n"); `why` says what is
  // wrong with it.
  Failure(int exit_code, std::string_view what, std::string_view why)
      : std::runtime_error(std::string(what) + ": " + std::string(why)), exit_code_(exit_code) {}

  // A library error met while doing `what`: its message (which starts with its Errc,
  // e.g. "invalid_argument: ...") and the exit status exit_code_for() assigns to it.
  static Failure from(std::string_view what, const Error& error) {
    return Failure(exit_code_for(error.code()), what, error.what());
  }

  int exit_code() const noexcept { return exit_code_; }

 private:
  int exit_code_;
};

// `text` with control bytes shown as \xNN, so that a lock name (any byte but NUL) or a
// command cannot break the one-line format of a diagnostic.
std::string printable(std::string_view text);

// Prints "warden: <message>" on stderr as one line. For warnings and errors alike:
// the line says which it is.
void print_diagnostic(std::string_view message);

}  // namespace warden::cli

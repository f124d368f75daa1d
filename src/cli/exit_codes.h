// cli/exit_codes.h — the exit statuses of the `warden` command.
//
// `warden run` exits with CMD's own status whenever CMD ran and the lease held
// throughout, so warden's own codes sit where commands rarely put theirs: the
// sysexits.h range (64..78) and the shell's 126/127/128+N. A script that must tell
// warden's failures from CMD's reads stderr, where warden prints one line per failure.
//
//   code    meaning
//   ------  ------------------------------------------------------------------------
//   0..125  CMD's exit status (CMD ran; the lease held until it exited)
//           (`warden elect` uses the same codes; its lease is a leadership)
//   64      usage: bad option, duration, URL, group, name or TTL; a mode or option
//           the engine cannot offer (EX_USAGE)
//   69      the lock service is unreachable or did not answer (EX_UNAVAILABLE)
//   70      the lease was lost while CMD ran; CMD may have overlapped another
//           holder, whatever its own status
//   71      internal or operating-system error: spawn, signals, an unexpected reply
//   75      the lock was not acquired within --wait (EX_TEMPFAIL; retry later)
//   77      the lock service refused our credentials (EX_NOPERM)
//   126     CMD was found but could not be executed (as in a shell)
//   127     CMD was not found (as in a shell)
//   128+N   CMD was killed by signal N; or warden was stopped by signal N while it
//           waited for the lock (CMD never ran)
#pragma once

#include <string_view>

#include "warden/error.h"

namespace warden::cli {

namespace exit_code {
inline constexpr int kOk = 0;
inline constexpr int kUsage = 64;
inline constexpr int kUnavailable = 69;
inline constexpr int kLeaseLost = 70;
inline constexpr int kInternal = 71;
inline constexpr int kTimeout = 75;
inline constexpr int kPermission = 77;
inline constexpr int kCannotExecute = 126;
inline constexpr int kNotFound = 127;
inline constexpr int kSignalBase = 128;
}  // namespace exit_code

// The exit status for a library error: what the user has to do about it decides the
// code, following the Errc's retry advice.
constexpr int exit_code_for(Errc code) noexcept {
  switch (code) {
    case Errc::invalid_argument:
    case Errc::unsupported:
      return exit_code::kUsage;
    case Errc::permission_denied:
      return exit_code::kPermission;
    case Errc::lost:
      return exit_code::kLeaseLost;
    case Errc::unavailable:
    case Errc::deadline_exceeded:
    case Errc::resource_exhausted:
      return exit_code::kUnavailable;
    case Errc::would_deadlock:
    case Errc::not_owner:
    case Errc::internal:
      break;
  }
  return exit_code::kInternal;
}

// The top-level help's note: every command documents its own statuses.
inline constexpr std::string_view kTopLevelExitHelp =
    "Exit status: each command lists its own (warden COMMAND --help). Common to all:\n"
    "  0   success\n"
    "  64  usage error: bad option, duration, URL, group, name or TTL, or a\n"
    "      mode/option the engine cannot offer\n"
    "  69  lock service unreachable or not answering\n"
    "  71  internal or operating-system error\n"
    "  77  lock service refused our credentials\n";

// The table above as `warden run`'s --help text.
inline constexpr std::string_view kExitCodesHelp =
    "Exit status:\n"
    "  0..125  CMD's exit status (CMD ran and the lease held until it exited)\n"
    "  64      usage error: bad option, duration, URL, group, name or TTL, or a\n"
    "          mode/option the engine cannot offer\n"
    "  69      lock service unreachable or not answering\n"
    "  70      lease lost while CMD ran (whatever CMD's own status)\n"
    "  71      internal or operating-system error\n"
    "  75      lock not acquired within --wait\n"
    "  77      lock service refused our credentials\n"
    "  126     CMD found but not executable\n"
    "  127     CMD not found\n"
    "  128+N   CMD killed by signal N, or warden stopped by signal N while waiting\n";

// `warden elect`'s --help text: the same codes, said of a leadership.
inline constexpr std::string_view kElectExitCodesHelp =
    "Exit status:\n"
    "  0..125  CMD's exit status (CMD ran and stayed the leader until it exited)\n"
    "  64      usage error: bad option, duration, URL, group, name, value or TTL,\n"
    "          or an engine without elections\n"
    "  69      lock service unreachable or not answering\n"
    "  70      leadership lost while CMD ran (whatever CMD's own status)\n"
    "  71      internal or operating-system error\n"
    "  75      not the leader within --wait\n"
    "  77      lock service refused our credentials\n"
    "  126     CMD found but not executable\n"
    "  127     CMD not found\n"
    "  128+N   CMD killed by signal N, or warden stopped by signal N while waiting\n";

}  // namespace warden::cli

#include "cli/hold_options.h"

#include <cstdlib>

#include "cli/duration.h"
#include "cli/exit_codes.h"
#include "cli/failure.h"

namespace warden::cli {

std::string url_or_environment(const std::string& url) {
  if (!url.empty()) return url;
  if (const char* env = std::getenv("WARDEN_URL"); env != nullptr && *env != '\0') return env;
  throw Failure(exit_code::kUsage, "--url", "not given, and WARDEN_URL is not set");
}

std::chrono::nanoseconds duration_option(std::string_view option, const std::string& text) {
  try {
    return parse_duration(text);
  } catch (const DurationError& e) {
    throw Failure(exit_code::kUsage, option, e.what());
  }
}

std::chrono::milliseconds millis_option(std::string_view option, const std::string& text) {
  try {
    return whole_milliseconds(duration_option(option, text));
  } catch (const DurationError& e) {
    throw Failure(exit_code::kUsage, option, e.what());
  }
}

std::optional<std::chrono::nanoseconds> wait_option(const std::string& text) {
  if (text.empty()) return std::nullopt;
  return duration_option("--wait", text);
}

LostPolicy lost_policy_option(const std::string& on_lost, const std::string& kill_after) {
  LostPolicy policy;
  if (on_lost == "term") {
    policy.action = OnLost::term;
  } else if (on_lost == "kill") {
    policy.action = OnLost::kill;
  } else if (on_lost == "ignore") {
    policy.action = OnLost::ignore;
  } else {
    throw Failure(exit_code::kUsage, "--on-lost",
                  "unknown action \"" + printable(on_lost) + "\" (one of term, kill, ignore)");
  }
  policy.kill_after = duration_option("--kill-after", kill_after);
  return policy;
}

std::string timeout_why(const std::optional<std::chrono::nanoseconds>& wait) {
  // Without --wait the library waits until granted, so this is not expected.
  if (!wait) return "the wait ended without a grant";
  if (*wait == wait->zero()) return "held elsewhere (--wait 0: tried once)";
  return "not granted within " + format_duration(*wait);
}

}  // namespace warden::cli

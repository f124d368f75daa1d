// cli/hold_options.h — the options that `warden run` and `warden elect` share: where the
// lock service is, how long to wait, how long a lease lasts, and what happens to CMD if
// the lease is lost. Each turns bad text into Failure(kUsage) naming the option, before
// any I/O, so both commands report bad input in the same words.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "cli/supervise.h"

namespace warden::cli {

// `url`, or $WARDEN_URL when `url` is empty. Throws Failure(kUsage) if neither is set.
std::string url_or_environment(const std::string& url);

// `text` as a duration for `option` ("--wait"). Throws Failure(kUsage).
std::chrono::nanoseconds duration_option(std::string_view option, const std::string& text);

// The same, for options the library counts in whole milliseconds (--ttl).
std::chrono::milliseconds millis_option(std::string_view option, const std::string& text);

// --wait: nullopt (forever) for empty text.
std::optional<std::chrono::nanoseconds> wait_option(const std::string& text);

// --on-lost (term, kill or ignore) and --kill-after.
LostPolicy lost_policy_option(const std::string& on_lost, const std::string& kill_after);

// Why nothing was granted within --wait, for the kTimeout failure.
std::string timeout_why(const std::optional<std::chrono::nanoseconds>& wait);

}  // namespace warden::cli

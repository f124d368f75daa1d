#include "core/names.h"

#include <chrono>
#include <string>

#include "warden/election.h"
#include "warden/error.h"

namespace warden::core {
namespace {

bool group_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

[[noreturn]] void invalid(const std::string& what) { throw Error(Errc::invalid_argument, what); }

constexpr std::chrono::milliseconds kMinTtl{10};
constexpr std::chrono::milliseconds kMaxTtl = std::chrono::hours(24 * 7);
constexpr std::chrono::milliseconds kMaxLockDelay = std::chrono::hours(1);

}  // namespace

void validate_group(std::string_view group) {
  if (group.empty()) invalid("lock group is empty");
  if (group.size() > kMaxGroupBytes) {
    invalid("lock group is " + std::to_string(group.size()) + " bytes; the limit is 64");
  }
  for (char c : group) {
    if (!group_char(c)) {
      invalid("lock group '" + std::string(group) + "' holds a character outside [A-Za-z0-9._-]");
    }
  }
}

void validate_name(std::string_view name) {
  if (name.empty()) invalid("lock name is empty");
  if (name.size() > kMaxNameBytes) {
    invalid("lock name is " + std::to_string(name.size()) + " bytes; the limit is 512");
  }
  if (name.find('\0') != std::string_view::npos) invalid("lock name holds a NUL byte");
}

void validate_lock_options(const LockOptions& options) {
  if (options.ttl < kMinTtl || options.ttl > kMaxTtl) {
    invalid("ttl " + std::to_string(options.ttl.count()) +
            "ms is outside the valid range 10ms..7d");
  }
  if (options.lock_delay.count() < 0 || options.lock_delay > kMaxLockDelay) {
    invalid("lock_delay " + std::to_string(options.lock_delay.count()) +
            "ms is outside the valid range 0..1h");
  }
}

void require_capabilities(const Capabilities& caps, Mode mode, const LockOptions& options) {
  if (mode == Mode::shared && !caps.shared) {
    throw Error(Errc::unsupported, "this engine has no shared (read) mode");
  }
  const Fairness fairness = caps.resolve(options.fairness);
  if (fairness == Fairness::fifo && !caps.fair) {
    throw Error(Errc::unsupported,
                "this engine has no FIFO order; leave fairness automatic (the engine's own "
                "order) or ask for non-fair (Fairness::non_fair; warden run --non-fair)");
  }
  if (fairness == Fairness::non_fair && !caps.non_fair) {
    throw Error(Errc::unsupported,
                "this engine has no non-fair mode; leave fairness automatic or ask for fifo");
  }
  if (options.lock_delay.count() > 0 && !caps.lock_delay) {
    throw Error(Errc::unsupported, "this engine has no lock-delay; set lock_delay = 0");
  }
  if (options.cache && !caps.cache) {
    throw Error(Errc::unsupported, "this engine cannot cache locks; set cache = false");
  }
}

void refuse_cache(const LockOptions& options, std::string_view what) {
  if (options.cache) {
    invalid("lock caching applies to locks; " + std::string(what) +
            " is always released on the backend: set cache = false");
  }
}

void validate_capacity(std::uint32_t capacity) {
  if (capacity == 0 || capacity > kMaxPermits) {
    invalid("a semaphore has 1.." + std::to_string(kMaxPermits) + " permits, not " +
            std::to_string(capacity));
  }
}

void validate_permits(std::uint32_t capacity, std::uint32_t permits) {
  validate_capacity(capacity);
  if (permits == 0 || permits > capacity) {
    invalid("asked for " + std::to_string(permits) + " permits of a semaphore of " +
            std::to_string(capacity) + "; ask for 1.." + std::to_string(capacity));
  }
}

void validate_leader_value(std::string_view value) {
  if (value.size() > kMaxLeaderValueBytes) {
    invalid("a leader's value is at most " + std::to_string(kMaxLeaderValueBytes) +
            " bytes, not " + std::to_string(value.size()));
  }
}

void validate_client_options(const ClientOptions& options) {
  validate_lock_options(options.lock_defaults);
  if (options.renew_interval.count() < 0) invalid("renew_interval is negative");
  if (options.op_timeout.count() <= 0) invalid("op_timeout must be positive");
  if (options.cache_idle.count() <= 0) invalid("cache_idle must be positive");
  if (options.cache_capacity == 0) invalid("cache_capacity must be positive");
  const RetryPolicy& r = options.retry;
  if (r.initial.count() <= 0 || r.max < r.initial) {
    invalid("retry policy needs 0 < initial <= max");
  }
  if (r.multiplier < 1.0) invalid("retry multiplier must be >= 1");
  if (r.jitter < 0.0 || r.jitter > 1.0) invalid("retry jitter must be within 0..1");
}

}  // namespace warden::core

#include "warden/error.h"

#include <string>

#include "warden/types.h"

namespace warden {

std::string_view to_string(Errc code) noexcept {
  switch (code) {
    case Errc::invalid_argument:
      return "invalid_argument";
    case Errc::unsupported:
      return "unsupported";
    case Errc::would_deadlock:
      return "would_deadlock";
    case Errc::not_owner:
      return "not_owner";
    case Errc::permission_denied:
      return "permission_denied";
    case Errc::lost:
      return "lost";
    case Errc::unavailable:
      return "unavailable";
    case Errc::deadline_exceeded:
      return "deadline_exceeded";
    case Errc::resource_exhausted:
      return "resource_exhausted";
    case Errc::internal:
      return "internal";
  }
  return "unknown";
}

RetryAdvice retry_advice(Errc code) noexcept {
  switch (code) {
    case Errc::unavailable:
    case Errc::deadline_exceeded:
      return RetryAdvice::same_call;
    case Errc::lost:
      return RetryAdvice::from_acquire;
    case Errc::resource_exhausted:
      return RetryAdvice::later;
    default:
      return RetryAdvice::never;
  }
}

Error::Error(Errc code, const std::string& message)
    : std::runtime_error(std::string(to_string(code)) + ": " + message), code_(code) {}

std::string_view to_string(Mode mode) noexcept {
  return mode == Mode::exclusive ? "exclusive" : "shared";
}

std::string_view to_string(Fairness fairness) noexcept {
  switch (fairness) {
    case Fairness::automatic:
      return "automatic";
    case Fairness::fifo:
      return "fifo";
    case Fairness::non_fair:
      return "non-fair";
  }
  return "unknown";
}

}  // namespace warden

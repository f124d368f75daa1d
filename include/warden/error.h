// warden/error.h — the one error type of the warden library.
//
// warden reports failures by throwing warden::Error. Contention and timeouts are
// *results*, never errors: a try or timed acquire that does not get the lock returns
// an empty Lease (or false from the Lockable calls). Every Error carries an Errc, and
// every Errc carries retry advice (abseil's status-code lesson):
//
//   Errc                 meaning                                          retry advice
//   -------------------  -----------------------------------------------  ------------
//   invalid_argument     bad group/name/TTL/URI/sequencer; nothing sent   never
//   unsupported          the engine cannot offer this capability          never
//   would_deadlock       shared→exclusive re-acquire from one thread      never
//   not_owner            release/renew of a grant this caller lacks       never
//   permission_denied    the backend refused our credentials              never
//   lost                 the lease was lost; the lock is no longer held   acquire again
//   unavailable          backend unreachable, or it vanished mid-call     the same call
//   deadline_exceeded    a backend call did not answer in op_timeout      the same call
//   resource_exhausted   a backend limit (connections, keys, waiters)     later
//   internal             a reply warden does not understand (a bug)       never
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace warden {

enum class Errc {
  invalid_argument,
  unsupported,
  would_deadlock,
  not_owner,
  permission_denied,
  lost,
  unavailable,
  deadline_exceeded,
  resource_exhausted,
  internal,
};

// What a caller should do after an error with this code.
enum class RetryAdvice {
  never,         // retrying cannot help: fix the call
  same_call,     // transient: the same call may succeed (back off first)
  from_acquire,  // the lease is gone: start again from acquire
  later,         // a limit was hit: retry after load drops
};

// "invalid_argument", "unavailable", ... (stable; used in metrics and logs).
std::string_view to_string(Errc code) noexcept;
RetryAdvice retry_advice(Errc code) noexcept;

class Error : public std::runtime_error {
 public:
  Error(Errc code, const std::string& message);

  Errc code() const noexcept { return code_; }
  RetryAdvice advice() const noexcept { return retry_advice(code_); }

 private:
  Errc code_;
};

}  // namespace warden

// engines/resp_client/backoff.h — spacing of repeated attempts (reconnects, retries)
// by a RetryPolicy: the delay starts at policy.initial and, for an exponential policy,
// grows by policy.multiplier after each failure up to policy.max; every delay is
// scaled by a random factor in [1 - jitter, 1 + jitter] so clients that failed
// together do not retry together.
//
// Thread safety: none (callers that share one guard it).
#pragma once

#include <chrono>

#include "warden/options.h"
#include "warden/types.h"

namespace warden::engines::resp_client {

class Backoff {
 public:
  explicit Backoff(const RetryPolicy& policy);

  // The delay to wait before the next attempt; each call moves one step along the
  // policy.
  Clock::duration next_delay();
  // Starts again from policy.initial.
  void reset();

 private:
  RetryPolicy policy_;
  std::chrono::duration<double, std::milli> current_;
};

}  // namespace warden::engines::resp_client

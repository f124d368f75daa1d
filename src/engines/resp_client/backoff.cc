#include "engines/resp_client/backoff.h"

#include <algorithm>
#include <random>

namespace warden::engines::resp_client {

Backoff::Backoff(const RetryPolicy& policy) : policy_(policy), current_(policy.initial) {}

Clock::duration Backoff::next_delay() {
  thread_local std::minstd_rand random{std::random_device{}()};
  const double jitter = std::clamp(policy_.jitter, 0.0, 1.0);
  std::uniform_real_distribution<double> factor(1.0 - jitter, 1.0 + jitter);
  const auto delay = current_ * factor(random);
  if (policy_.kind == RetryPolicy::Kind::exponential) {
    const std::chrono::duration<double, std::milli> max(policy_.max);
    current_ = std::min(max, current_ * std::max(1.0, policy_.multiplier));
  }
  return std::chrono::duration_cast<Clock::duration>(delay);
}

void Backoff::reset() { current_ = policy_.initial; }

}  // namespace warden::engines::resp_client

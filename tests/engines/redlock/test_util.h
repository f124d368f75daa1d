// Small helpers shared by the redlock:// engine tests: the URI parameters a test runs
// with and the time bounds they imply, the seed of a randomized test, client options without
// fairness (redlock:// has none), and waiting for the masters to hold no grant keys.
#pragma once

#include <gtest/gtest.h>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "support/redis_masters.h"
#include "support/waiting.h"
#include "warden/client.h"
#include "warden/lease.h"
#include "warden/lock.h"
#include "warden/options.h"
#include "warden/types.h"

namespace warden::testing {

// Scheduling slack for a sanitizer build on a loaded 2-core machine: far above any
// real delay of a step, far below a hang. Bounds built from it tell "ended by its
// timeouts and attempts" from "hung", never fast from slow.
inline constexpr Clock::duration kSlack = 10s;

// The query parameters of a redlock:// URI that shape its timing, with the engine's
// defaults.
struct RedlockParams {
  std::chrono::milliseconds node_timeout{100};
  int retry_count = 3;
  std::chrono::milliseconds retry_delay{20};
  std::chrono::milliseconds retry_jitter{20};

  // "node_timeout_ms=T&retry_count=C&retry_delay_ms=D&retry_jitter_ms=J".
  std::string query() const {
    return "node_timeout_ms=" + std::to_string(node_timeout.count()) +
           "&retry_count=" + std::to_string(retry_count) +
           "&retry_delay_ms=" + std::to_string(retry_delay.count()) +
           "&retry_jitter_ms=" + std::to_string(retry_jitter.count());
  }

  // One attempt when masters do not answer: a round of SET NX that waits at most the
  // node timeout for each, and a round that takes back what it set, bounded the same.
  Clock::duration attempt() const { return 2 * node_timeout; }
  // The longest a try (Wait::none()) may take when no attempt gets a quorum: every
  // attempt, and the longest sleep between two; plus kSlack.
  Clock::duration try_bound() const {
    return (retry_count + 1) * attempt() + retry_count * (retry_delay + retry_jitter) + kSlack;
  }
  // The longest a waiting acquire may take past its deadline: the attempt under way
  // when it passes and one sleep; plus kSlack.
  Clock::duration wait_overrun() const { return attempt() + retry_delay + retry_jitter + kSlack; }
};

// The seed of a randomized test: WARDEN_SEED from the environment when set (a decimal
// number; anything else fails the test), else a fresh one from std::random_device.
// Printed to stderr and recorded as the test's "seed" property either way, so a
// failure reruns with WARDEN_SEED=<seed>.
inline std::uint32_t test_seed() {
  std::uint32_t seed = 0;
  const char* given = std::getenv("WARDEN_SEED");
  if (given != nullptr) {
    const std::string_view text(given);
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seed);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
      ADD_FAILURE() << "WARDEN_SEED='" << text << "' is not a decimal 32-bit number";
      throw std::invalid_argument("bad WARDEN_SEED");
    }
  } else {
    seed = std::random_device{}();
  }
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  std::fprintf(stderr, "seed %u (rerun with WARDEN_SEED=%u)\n", seed, seed);
  return seed;
}

// ClientOptions for redlock://: non-fair locks (the only kind it has) with `ttl`.
inline ClientOptions redlock_options(std::chrono::milliseconds ttl = LockOptions{}.ttl) {
  ClientOptions options;
  options.lock_defaults.fairness = Fairness::non_fair;
  options.lock_defaults.ttl = ttl;
  return options;
}

// true once no up master holds a grant key of any lock (within `timeout`).
inline bool no_grant_keys(RedisMasters& masters, Clock::duration timeout = kPrompt) {
  return eventually([&] { return masters.grant_keys().empty(); }, timeout);
}

// true once exactly the masters `expected` hold (group, name) (within `timeout`). An
// acquire that gave up has sent its withdrawals, but waits for a quorum's say only, not
// for every master's answer (resp_client::fan_out's grace): a master starved of the CPU
// runs its withdraw a moment after the acquire returned.
inline bool comes_to_holding(RedisMasters& masters, std::string_view group, std::string_view name,
                             const std::vector<int>& expected,
                             Clock::duration timeout = kPrompt) {
  return eventually([&] { return masters.holding(group, name) == expected; }, timeout);
}

// "mI mJ ..." for a failure message.
inline std::string describe_masters(const std::vector<int>& masters) {
  std::string text;
  for (int m : masters) text += " m" + std::to_string(m);
  return text.empty() ? " none" : text;
}

// The up masters that are not in `down`, in order: who should answer.
inline std::vector<int> all_but(const RedisMasters& masters, const std::vector<int>& down) {
  std::vector<int> rest;
  for (int i = 0; i < masters.size(); ++i) {
    bool is_down = false;
    for (int d : down) is_down = is_down || d == i;
    if (!is_down) rest.push_back(i);
  }
  return rest;
}

}  // namespace warden::testing

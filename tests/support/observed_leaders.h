// tests/support/observed_leaders.h — what an Election's observer was told, in order,
// readable from any thread while it goes on.
#pragma once

#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "support/waiting.h"
#include "warden/election.h"

namespace warden::testing {

class ObservedLeaders {
 public:
  // Observes `election` (every `poll`, or as its engine signals) on a thread of its own,
  // until the returned thread is stopped or destroyed. `this` must outlive it.
  std::jthread observe(Election election, Clock::duration poll) {
    return std::jthread([this, election = std::move(election), poll](std::stop_token stop) {
      election.observe([this](const std::optional<Leader>& leader) { add(leader); }, stop, poll);
    });
  }

  void add(const std::optional<Leader>& leader) {
    std::lock_guard lock(mu_);
    seen_.push_back(leader);
  }
  std::vector<std::optional<Leader>> seen() const {
    std::lock_guard lock(mu_);
    return seen_;
  }
  std::optional<Leader> last() const {
    std::lock_guard lock(mu_);
    return seen_.empty() ? std::nullopt : seen_.back();
  }
  // Every report so far, for a failure message: "none, a@7, a2@7, none".
  std::string describe() const {
    std::string out;
    for (const auto& leader : seen()) {
      if (!out.empty()) out += ", ";
      out += leader ? leader->value + '@' + std::to_string(leader->term) : std::string("none");
    }
    return out.empty() ? std::string("nothing") : out;
  }
  // true once the last report is `leader` (within `timeout`).
  bool saw(const std::optional<Leader>& leader, Clock::duration timeout = 5s) const {
    return eventually(
        [&] {
          std::lock_guard lock(mu_);
          return !seen_.empty() && seen_.back() == leader;
        },
        timeout);
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::optional<Leader>> seen_;
};

}  // namespace warden::testing

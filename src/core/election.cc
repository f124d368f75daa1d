// Elections on the lock seam: a campaign is an exclusive grant carrying a value; the
// leader is the key's exclusive holder as inspect shows it.
#include "warden/election.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "core/client_state.h"
#include "core/hold.h"
#include "core/names.h"

namespace warden {

namespace {

// The leader in a lock status: its exclusive holder (a shared holder leads nothing).
std::optional<Leader> leader_in(const LockStatus& status) {
  for (const HolderStatus& holder : status.holders) {
    if (holder.mode == Mode::exclusive && holder.permits == 0) {
      return Leader{holder.value, holder.token};
    }
  }
  return std::nullopt;
}

}  // namespace

Leadership::Leadership(Lease lease, std::shared_ptr<detail::Hold> hold, std::string value) noexcept
    : lease_(std::move(lease)), hold_(std::move(hold)), value_(std::move(value)) {}

const std::string& Leadership::value() const {
  if (!valid()) throw Error(Errc::invalid_argument, "an empty Leadership has no value");
  return value_;
}

void Leadership::proclaim(std::string value) {
  core::validate_leader_value(value);
  if (!valid()) throw Error(Errc::lost, "an empty Leadership leads nothing");
  if (hold_->state() != detail::Hold::State::active) {
    throw Error(Errc::lost, "no longer the leader of " + hold_->grant.key.joined());
  }
  if (!hold_->client->engine().proclaim(hold_->grant, value)) {
    throw Error(Errc::lost, "no longer the leader of " + hold_->grant.key.joined() +
                                ": the backend has another leader or none");
  }
  value_ = std::move(value);
}

Election::Election(std::shared_ptr<detail::ClientState> client, std::string group, std::string name,
                   LockOptions options)
    : client_(std::move(client)),
      group_(std::move(group)),
      name_(std::move(name)),
      options_(options) {}

Leadership Election::campaign(std::string value, Wait wait, std::stop_token stop) {
  auto hold = client_->campaign(core::LockKey{group_, name_}, value, options_, wait.deadline(),
                                std::move(stop));
  if (!hold) return Leadership();
  return Leadership(Lease(client_, hold, Mode::exclusive), hold, std::move(value));
}

AcquireHandle Election::campaign_async(std::string value, Wait wait, CampaignCallback done,
                                      Executor executor) {
  auto request =
      client_->campaign_request(core::LockKey{group_, name_}, value, options_, wait.deadline(), {});
  if (!done) throw Error(Errc::invalid_argument, "an asynchronous campaign needs a callback");
  // The grant arrives as a Lease; its hold and the value make it a Leadership.
  AcquireCallback lead = [done = std::move(done), value = std::move(value)](
                             std::exception_ptr error, Lease lease) {
    if (!lease) {
      done(error, Leadership());
      return;
    }
    auto hold = lease.hold_;
    done(error, Leadership(std::move(lease), std::move(hold), value));
  };
  return AcquireHandle(
      client_->grant_async(client_, std::move(request), std::move(lead), std::move(executor)));
}

std::optional<Leader> Election::leader() const {
  const core::LockKey key{group_, name_};
  // A Leadership this client dropped sent its release without waiting: the client must
  // not report itself as the leader it let go (docs/contract.md).
  client_->settle_release_of(key);
  return leader_in(client_->engine().inspect(key));
}

void Election::observe(const std::function<void(const std::optional<Leader>&)>& on_change,
                       std::stop_token stop, Clock::duration poll) const {
  core::Engine& engine = client_->engine();
  const core::LockKey key{group_, name_};
  // With a watch, looks between signals only guard against a watch that went quiet
  // without breaking (a peer that vanished without closing).
  const Clock::duration guard_poll = std::max<Clock::duration>(10 * poll, std::chrono::seconds(1));
  std::unique_ptr<core::KeyWatch> watch;
  bool first = true;
  std::optional<Leader> last;
  while (!stop.stop_requested()) {
    if (!watch || watch->broken()) {
      // Opened before the look below, so that a change after the look is signalled.
      try {
        watch = engine.watch(key);
      } catch (const Error&) {
        watch.reset();  // polled this round; asked again at the next
      }
    }
    std::optional<std::optional<Leader>> now;
    try {
      now = leader();
    } catch (const Error&) {
      // Down or unreachable: look again at the next poll.
    }
    // A look from before the last one reported (a lagging replica) would take the term
    // back: it is skipped, and the next look reports what is current.
    const bool older = now && *now && last && (*now)->term < last->term;
    if (now && !older && (first || *now != last)) {
      first = false;
      last = *now;
      on_change(last);
    }
    if (watch && !watch->broken() && now) {
      watch->wait(Clock::now() + (watch->complete() ? guard_poll : poll), stop);
      // A watch that broke is opened again after a poll, not at once: a backend that
      // takes watches and drops them must not turn this loop into a busy one.
      if (!watch->broken()) continue;
    }
    std::mutex mu;
    std::condition_variable_any woken;
    std::unique_lock lock(mu);
    woken.wait_for(lock, stop, poll, [] { return false; });
  }
}

}  // namespace warden

// A silent partition: a client's connections to the backend stop passing packets, with
// no FIN and no RST (a NAT or firewall that forgot them, a link that went dark between
// two switches), and its new connections get no answer. The operating system notices
// nothing for minutes. The contract still holds on the client's own clocks:
//   - a lease it cannot renew is reported lost before the backend grants the lock to
//     another client;
//   - a timed wait ends by its deadline plus op_timeout;
//   - a lock it cached is never served from its cache once the backend may have given it
//     to another client, and once the partition heals the client works again.
//
// The partitioned clients reach the backend through relays (torture::PartitionProxy, one
// per host:port of the URI) that are silenced and cut; the other client reaches it
// directly. A backend that tells its clients where to connect (Redis Sentinel and
// Cluster name the master and the nodes) cannot be cut off this way and is skipped.
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "conformance/conformance_suite.h"
#include "torture/partition_proxy.h"

namespace warden::conformance {
namespace {

// Two seconds, not one: beside two CPU hogs and the sanitizer run, a partitioned
// client's calls before the cut (through its relays) have taken more than one.
constexpr auto kOpTimeout = 2000ms;
constexpr auto kTtl = 3000ms;
constexpr Clock::duration kWait = 2s;
// What the waiter's bound is given beyond the contract's for a loaded machine.
constexpr Clock::duration kSlack = 1s;

TEST_P(Conformance, ASilentPartitionLosesTheLeaseBeforeTheRegrantAndEndsWaitsOnTheirBound) {
  if (!backend().reached_only_at_its_uri()) {
    GTEST_SKIP() << GetParam().name << " tells its clients where to connect: no relay in front of "
                 << "its URI sees every connection";
  }
  std::vector<std::unique_ptr<torture::PartitionProxy>> relays;
  const std::string relayed = torture::proxied_url(backend().uri(), relays);
  ClientOptions options;
  options.op_timeout = kOpTimeout;
  options.lock_defaults.cache = caching();
  const LockOptions lock = lock_options_with_ttl(kTtl);
  Client cut_off = Client::open(relayed, options);
  Client cut_off_waiter = Client::open(relayed, options);
  Client other = open_client();

  // On a cached instance: a lock the partitioned client keeps in its cache, idle.
  if (caching()) {
    Lease kept = cut_off.lock(group(), "kept", lock).acquire(Mode::exclusive, Wait::none());
    ASSERT_TRUE(kept);
  }
  Lease held = cut_off.lock(group(), "x", lock).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  Flag lost;
  held.on_lost([&lost] { lost.set(); });
  const auto waiter_from = Clock::now();
  // What the waiter's acquire ended with, said when it did not queue: its error, or that
  // it ran out before queuing.
  std::string waiter_outcome = "still waiting";
  auto waiter = std::async(std::launch::async, [&] {
    try {
      const Lease got =
          cut_off_waiter.lock(group(), "x", lock).acquire(Mode::exclusive, Wait::up_to(kWait));
      waiter_outcome = got ? "granted" : "ran out";
    } catch (const Error& e) {
      waiter_outcome = std::string("failed: ") + e.what();
    }
    return Clock::now();
  });
  if (const auto queued_one = queue_reaches("x", 1); !queued_one) {
    const auto ended_at = waiter.get();
    FAIL() << "the partitioned waiter did not queue (" << queued_one.message() << "); its acquire "
           << waiter_outcome << " after "
           << std::chrono::duration_cast<std::chrono::milliseconds>(ended_at - waiter_from).count()
           << " ms";
  }

  for (auto& relay : relays) {
    relay->cut();  // new connections get no answer
    relay->silence_connections();
  }

  // Another client is granted the lock once the backend ended the silent holder's lease;
  // the holder was told before.
  // With the library's 30 s lease: the other client's hold must last the whole clause
  // however starved its renewals are, so that a grant to the healed client below can
  // only be a lock given twice (a 3 s lease lapsed beside two CPU hogs, and the lock was
  // then rightly free).
  Lease taken =
      other.lock(group(), "x", lock_options()).acquire(Mode::exclusive, Wait::up_to(kLongDeadline));
  const auto granted_at = Clock::now();
  ASSERT_TRUE(taken) << "the backend never ended the partitioned holder's lease";
  ASSERT_TRUE(lost.is_set()) << "another client was granted the lock while its partitioned "
                                "holder was not told its lease was lost";
  EXPECT_LE(lost.set_at(), granted_at + kClockSlack);
  EXPECT_TRUE(held.lost());

  const auto waiter_bound = waiter_from + kWait + kOpTimeout + kSlack;
  const bool waiter_ended = waiter.wait_until(waiter_bound) == std::future_status::ready;

  // The cached lock the backend may have given away: another client is granted it, and
  // the partitioned client does not serve it from its cache.
  if (caching()) {
    Lease theirs =
        other.lock(group(), "kept", lock).acquire(Mode::exclusive, Wait::up_to(kLongDeadline));
    ASSERT_TRUE(theirs) << "the partitioned client's cached grant never ended on the backend";
    Lease served;
    try {
      served = cut_off.lock(group(), "kept", lock).acquire(Mode::exclusive, Wait::none());
    } catch (const Error&) {
    }
    EXPECT_FALSE(served) << "a cached grant the backend gave away was served from the cache";
  }

  // Healed: the partitioned clients work again (their silenced connections are never
  // answered; they connect anew), and find the lock taken until it is released.
  for (auto& relay : relays) relay->heal();
  { Lease gone = std::move(held); }
  const auto waiter_ended_at = waiter.get();
  EXPECT_TRUE(waiter_ended)
      << "a partitioned waiter's timed acquire outlived its deadline + "
         "op_timeout: it ended "
      << std::chrono::duration_cast<std::chrono::milliseconds>(waiter_ended_at - waiter_from)
             .count()
      << " ms after it began, the bound was "
      << std::chrono::duration_cast<std::chrono::milliseconds>(waiter_bound - waiter_from).count()
      << " ms";

  bool granted_while_taken = false;
  std::string last_error;
  EXPECT_TRUE(eventually(
      [&] {
        try {
          if (!cut_off.lock(group(), "x", lock).acquire(Mode::exclusive, Wait::none())) return true;
          granted_while_taken = true;
        } catch (const Error& e) {
          last_error = e.what();  // still reconnecting
        }
        return false;
      },
      kLongDeadline, 100ms))
      << (granted_while_taken ? "the healed client found the lock free while another client held it"
                              : "the healed client never reached the backend again; its last "
                                "error: " +
                                    last_error);
  EXPECT_FALSE(granted_while_taken) << "the healed client was granted a lock another client held"
                                    << (taken.lost() ? " (that client's lease was lost)" : "");
  taken.release();
  Lease again =
      cut_off.lock(group(), "x", lock).acquire(Mode::exclusive, Wait::up_to(kLongDeadline));
  EXPECT_TRUE(again) << "the healed client was never granted the free lock";
  if (again) EXPECT_NO_THROW(again.release());
}

}  // namespace
}  // namespace warden::conformance

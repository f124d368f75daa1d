// The conformance suite against warden://, a real wardend (one per case kind and test process)
// on a free loopback port with a data dir of its own.
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "conformance/backend.h"
#include "conformance/conformance_suite.h"
#include "conformance/election_suite.h"
#include "conformance/multi_lock_suite.h"
#include "conformance/semaphore_suite.h"
#include "support/server_process.h"
#include "support/tls_wardend.h"
#include "support/wardend_probe.h"

namespace warden::conformance {
namespace {

// wardend is the lock table behind a socket, with durable token reservations.
constexpr Capabilities kWarden{.shared = true,
                               .fair = true,
                               .non_fair = true,
                               .lock_delay = true,
                               .fencing = true,
                               .durable_tokens = true,
                               .check = true,
                               .semaphore = true,
                               .atomic_multi = true,
                               .election = true,
                               .watch = true,
                               .cache = true};

// The same backend over plain TCP, or over mutual TLS (wardens:// with the test
// certificates; the probe behind the clients' back stays on the plain port).
class WardendBackend final : public Backend {
 public:
  explicit WardendBackend(bool tls = false) {
    if (tls) {
      tls_.emplace(/*mutual=*/true);
    } else {
      plain_.emplace();
    }
  }
  std::string uri() const override { return tls_ ? tls_->uri(true) : server().uri(); }
  bool reached_only_at_its_uri() const override { return true; }

  // wardend releases a grant only for its holder's owner secret, which only the
  // holder's ACQUIRE reply carried, and has no command that drops grants: nothing
  // behind the clients' back can make it forget one (the clause
  // AStrangerWithTheRightTokenCannotRenewOrReleaseTheGrant checks that it cannot be done). The
  // renewal that finds a grant gone is covered by tests/engines/warden/control_test.cc, which
  // releases with the engine's own secrets.
  bool drop_grants(std::string_view /*group*/, std::string_view /*name*/) override { return false; }

  // wardend's own count of the lock's waiters (INSPECT, docs/protocol.md).
  std::optional<std::size_t> queued(std::string_view group, std::string_view name) override {
    return testing::WardendProbe(server().port()).inspect(key_of(group, name)).waiters;
  }

  bool freeze() override {
    server().process().signal(SIGSTOP);
    return true;
  }
  void thaw() override { server().process().signal(SIGCONT); }

 private:
  static std::string key_of(std::string_view group, std::string_view name) {
    std::string key(group);
    key += '/';
    key += name;
    return key;
  }

  const testing::Wardend& server() const { return tls_ ? tls_->server : *plain_; }
  testing::Wardend& server() { return tls_ ? tls_->server : *plain_; }

  std::optional<testing::TlsWardend> tls_;  // one of the two
  std::optional<testing::Wardend> plain_;
};

const EngineCase kPlain{"Warden", kWarden, [] { return std::make_unique<WardendBackend>(); }};
const EngineCase kTls{"WardenTls", kWarden, [] { return std::make_unique<WardendBackend>(true); }};
// Every lock cached (LockOptions::cache): the contract holds with caching on.
const EngineCase kCached{"WardenCached", kWarden, [] { return std::make_unique<WardendBackend>(); },
                         /*cache=*/true};

INSTANTIATE_TEST_SUITE_P(Warden, Conformance, ::testing::Values(kPlain, kTls, kCached),
                         name_printer);
INSTANTIATE_TEST_SUITE_P(Warden, SemaphoreConformance, ::testing::Values(kPlain), name_printer);
INSTANTIATE_TEST_SUITE_P(Warden, ElectionConformance, ::testing::Values(kPlain), name_printer);

INSTANTIATE_TEST_SUITE_P(Warden, MultiLockConformance, ::testing::Values(kPlain), name_printer);

}  // namespace
}  // namespace warden::conformance

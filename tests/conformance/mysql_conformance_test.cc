// The conformance suite against mysql://, on a real MariaDB (Debian's mariadbd) started
// once per test process on a free loopback port with a temp data dir (tests/support).
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "conformance/backend.h"
#include "conformance/conformance_suite.h"
#include "conformance/election_suite.h"
#include "conformance/multi_lock_suite.h"
#include "conformance/semaphore_suite.h"
#include "support/mariadb_server.h"

namespace warden::conformance {
namespace {

// mysql:// is exclusive only (GET_LOCK has one mode) and queues waiters in arrival
// order (the server's lock queue; Conformance.FairWaitersAreGrantedInFifoOrder holds
// it to that); no barging, no lock-delay; tokens come from a sequence made durable, so
// they survive a restart. Elections are a lock whose value is a row written with the
// grant. A semaphore's permits are slot locks behind a FIFO turnstile
// (docs/engines/mysql.md, Semaphores).
constexpr Capabilities kMysql{.shared = false,
                              .fair = true,
                              .non_fair = false,
                              .lock_delay = false,
                              .fencing = true,
                              .durable_tokens = true,
                              .check = true,
                              .semaphore = true,
                              .election = true};

class MariaDbBackend final : public Backend {
 public:
  std::string uri() const override { return server_.uri(); }
  bool reached_only_at_its_uri() const override { return true; }

  // Behind the clients' back, as an operator could: KILL the session that holds the
  // lock. The client's other sessions live on.
  bool drop_grants(std::string_view group, std::string_view name) override {
    if (const auto session = server_.holder_session(group, name)) {
      server_.query("KILL " + std::to_string(*session));
    }
    return true;
  }

  // The sessions the server shows waiting in GET_LOCK on the lock's name, and those
  // running a semaphore's warden_take on it (queued at its turnstile, or its head).
  std::optional<std::size_t> queued(std::string_view group, std::string_view name) override {
    return server_.waiting_sessions(group, name);
  }

  bool freeze() override {
    server_.pause();
    return true;
  }
  void thaw() override { server_.resume(); }

 private:
  testing::MariaDbServer server_;
};

const EngineCase kMariaDb{"MariaDb", kMysql, [] { return std::make_unique<MariaDbBackend>(); }};

INSTANTIATE_TEST_SUITE_P(Mysql, Conformance, ::testing::Values(kMariaDb), name_printer);
INSTANTIATE_TEST_SUITE_P(Mysql, MultiLockConformance, ::testing::Values(kMariaDb), name_printer);
INSTANTIATE_TEST_SUITE_P(Mysql, ElectionConformance, ::testing::Values(kMariaDb), name_printer);
INSTANTIATE_TEST_SUITE_P(Mysql, SemaphoreConformance, ::testing::Values(kMariaDb), name_printer);

}  // namespace
}  // namespace warden::conformance

// The conformance suite against postgres://, on a real PostgreSQL 15 started once per
// test process on a free loopback port with a temp data dir (tests/support/postgres_server.h).
#include <csignal>
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
#include "support/postgres_server.h"

namespace warden::conformance {
namespace {

// postgres:// queues fairly (PostgreSQL's lock queue) and has shared mode, but no
// barging and no lock-delay (docs/engines/postgres.md); tokens come from a sequence.
// Semaphores queue in a turnstile and count permits; an election's value is a row
// written by the campaign's grant statement.
constexpr Capabilities kPostgres{.shared = true,
                                 .fair = true,
                                 .non_fair = false,
                                 .lock_delay = false,
                                 .fencing = true,
                                 .durable_tokens = true,
                                 .check = true,
                                 .semaphore = true,
                                 .election = true};

class PostgresBackend final : public Backend {
 public:
  std::string uri() const override { return server_.uri(); }
  bool reached_only_at_its_uri() const override { return true; }

  // Behind the clients' back, as an operator could: end every session that holds the
  // lock (pg_terminate_backend), which frees its advisory locks.
  bool drop_grants(std::string_view group, std::string_view name) override {
    const std::string id = testing::pg_lock_id_sql(std::string(group), std::string(name));
    server_.query("SELECT pg_terminate_backend(pid) FROM pg_locks WHERE granted AND " +
                  testing::pg_advisory_rows(id));
    return true;
  }

  // Sessions waiting in PostgreSQL's queue for the lock's advisory key, and a
  // semaphore's requests that wait: sessions holding a "request for k" key of its block
  // (2^62 + id * 2^21 + 2^20 + k, k < 2^20 - 1) without a grant marker (a negative key,
  // held exclusive).
  std::optional<std::size_t> queued(std::string_view group, std::string_view name) override {
    const std::string id = testing::pg_lock_id_sql(std::string(group), std::string(name));
    const auto count = server_.value("SELECT count(*) FROM pg_locks WHERE NOT granted AND " +
                                     testing::pg_advisory_rows(id));
    const std::string keys =
        "SELECT pid, granted, mode, (classid::bigint << 32) | objid::bigint AS key "
        "FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1";
    const auto waiting = server_.value(
        "WITH a AS MATERIALIZED (" + keys + "), b AS (SELECT (1::bigint << 62) + (" + id +
        ") * 2097152 AS base) SELECT count(*) FROM a r, b WHERE r.granted "
        "AND r.key BETWEEN b.base + 1048577 AND b.base + 2097150 "
        "AND NOT EXISTS (SELECT 1 FROM a m WHERE m.pid = r.pid AND m.granted AND m.key < 0 "
        "AND m.mode = 'ExclusiveLock')");
    return (count ? static_cast<std::size_t>(std::stoul(*count)) : 0) +
           (waiting ? static_cast<std::size_t>(std::stoul(*waiting)) : 0);
  }

  // The postmaster and every backend and worker it started.
  bool freeze() override {
    server_.process().signal_family(SIGSTOP);
    return true;
  }
  void thaw() override { server_.process().signal_family(SIGCONT); }

 private:
  testing::PostgresServer server_;
};

INSTANTIATE_TEST_SUITE_P(Postgres, Conformance,
                         ::testing::Values(EngineCase{
                             "Postgres", kPostgres,
                             [] { return std::make_unique<PostgresBackend>(); }}),
                         name_printer);

INSTANTIATE_TEST_SUITE_P(Postgres, SemaphoreConformance,
                         ::testing::Values(EngineCase{
                             "Postgres", kPostgres,
                             [] { return std::make_unique<PostgresBackend>(); }}),
                         name_printer);

INSTANTIATE_TEST_SUITE_P(Postgres, ElectionConformance,
                         ::testing::Values(EngineCase{
                             "Postgres", kPostgres,
                             [] { return std::make_unique<PostgresBackend>(); }}),
                         name_printer);

INSTANTIATE_TEST_SUITE_P(Postgres, MultiLockConformance,
                         ::testing::Values(EngineCase{
                             "Postgres", kPostgres,
                             [] { return std::make_unique<PostgresBackend>(); }}),
                         name_printer);

}  // namespace
}  // namespace warden::conformance

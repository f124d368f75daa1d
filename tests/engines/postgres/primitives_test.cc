// postgres://'s semaphores and elections, read from outside with the fixture's own libpq
// connection: where an election's value is stored and how a proclaim changes it, what
// a semaphore's requests hold in pg_locks, that a killed holder's permits go to a
// waiter, that nothing is left once released, and that refused requests change nothing.
#include <gtest/gtest.h>

#include <future>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/postgres_server.h"
#include "support/waiting.h"
#include "warden/client.h"
#include "warden/election.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"
#include "warden/semaphore.h"

namespace warden::testing {
namespace {

using namespace std::chrono_literals;

// pg_locks' advisory rows as bigint keys, in this database.
const std::string kKeys =
    "(SELECT pid, granted, (classid::bigint << 32) | objid::bigint AS key FROM pg_locks "
    "WHERE locktype = 'advisory' AND objsubid = 1 AND database = (SELECT oid FROM pg_database "
    "WHERE datname = current_database()))";

// The semaphore key block of (group, name): 2^62 + id * 2^21 (docs/engines/postgres.md).
std::string block(const std::string& group, const std::string& name) {
  return "((1::bigint << 62) + (" + pg_lock_id_sql(group, name) + ") * 2097152)";
}

// Every advisory key some session holds or waits for, sorted, one "pid:key:granted" each.
std::vector<std::string> advisory_state(PostgresServer& server) {
  std::vector<std::string> out;
  for (const auto& row :
       server.query("SELECT pid || ':' || key || ':' || granted FROM " + kKeys + " a ORDER BY 1")) {
    out.push_back(row.at(0));
  }
  return out;
}

// The pid of the session that holds the grant of `token` (its marker, key -token).
std::string session_of(PostgresServer& server, std::uint64_t token) {
  return server
      .value("SELECT pid FROM " + kKeys + " a WHERE granted AND key = -" + std::to_string(token))
      .value_or("");
}

Error error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return Error(Errc::internal, "no error");
}

TEST(PostgresElection, TheValueIsTheLeadersRowOfItsTermAndAProclaimChangesItInPlace) {
  PostgresServer server;
  Client client = Client::open(server.uri(), unhurried_options());
  Leadership leading = client.election("cron", "scheduler").campaign("node-a:8080", Wait::none());
  ASSERT_TRUE(leading);
  const std::string row =
      "SELECT token || '/' || convert_from(value, 'UTF8') FROM warden.leaders "
      "WHERE lock_id = (" +
      pg_lock_id_sql("cron", "scheduler") + ")";
  EXPECT_EQ(server.value(row), std::to_string(leading.term()) + "/node-a:8080")
      << "written by the grant itself, with the term";
  leading.proclaim("node-a:9090");
  EXPECT_EQ(server.value(row), std::to_string(leading.term()) + "/node-a:9090")
      << "the same row, the same term, the new value";
  EXPECT_EQ(server.value("SELECT count(*) FROM warden.leaders"), "1");
}

TEST(PostgresElection, AResignedLeadersRowIsNotBelievedAndItsSessionHoldsNothing) {
  PostgresServer server;
  Client a = Client::open(server.uri(), unhurried_options());
  Client b = Client::open(server.uri(), unhurried_options());
  Leadership first = a.election("cron", "scheduler").campaign("a", Wait::none());
  ASSERT_TRUE(first);
  const std::uint64_t term = first.term();
  first.resign();
  // The row stays (the next campaign overwrites it) but no session holds its term.
  EXPECT_EQ(server.value("SELECT token FROM warden.leaders"), std::to_string(term));
  EXPECT_EQ(server.value("SELECT count(*) FROM " + kKeys + " a"), "0") << "a lock left held";
  EXPECT_EQ(b.election("cron", "scheduler").leader(), std::nullopt);
  // A plain lock of the name now: its holder carries no value, the old row is not its.
  Lease lock = b.lock("cron", "scheduler").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lock);
  const auto shown = a.election("cron", "scheduler").leader();
  ASSERT_TRUE(shown);
  EXPECT_EQ(*shown, (Leader{"", lock.token()}));
}

TEST(PostgresElection, AProclaimFromASessionThatWasEndedIsLostAndChangesNothing) {
  PostgresServer server;
  Client a = Client::open(server.uri(), unhurried_options());
  Client b = Client::open(server.uri(), unhurried_options());
  LockOptions options;
  options.ttl = 30s;
  Leadership old = a.election("cron", "scheduler", options).campaign("old", Wait::none());
  ASSERT_TRUE(old);
  server.query("SELECT pg_terminate_backend(" + session_of(server, old.term()) + ")");
  Leadership next = b.election("cron", "scheduler").campaign("new", Wait::up_to(10s));
  ASSERT_TRUE(next);
  const Error e = error_of([&] { old.proclaim("still here?"); });
  EXPECT_EQ(e.code(), Errc::lost) << e.what();
  EXPECT_EQ(server.value("SELECT token || '/' || convert_from(value, 'UTF8') FROM warden.leaders"),
            std::to_string(next.term()) + "/new");
}

TEST(PostgresSemaphore, ARequestHoldsItsNItsKTheLockIdSharedAndItsMarker) {
  PostgresServer server;
  Client client = Client::open(server.uri(), unhurried_options());
  Lease three = client.semaphore("media", "encoders", 4).acquire(3, Wait::none());
  ASSERT_TRUE(three);
  const std::string pid = session_of(server, three.token());
  ASSERT_FALSE(pid.empty());
  const std::string b = block("media", "encoders");
  const std::string id = "(" + pg_lock_id_sql("media", "encoders") + ")";
  const std::string role =
      "CASE WHEN key < 0 THEN 'marker' WHEN key = " + id + " THEN 'id' WHEN key = " + b +
      " THEN 'turnstile' WHEN key = " + b + " + 2097151 THEN 'in' WHEN key <= " + b +
      " + 1048576 THEN 'N=' || (key - " + b + ") ELSE 'k=' || (key - " + b + " - 1048576) END";
  EXPECT_EQ(server.value("SELECT string_agg(" + role + ", ',' ORDER BY key) FROM " + kKeys +
                         " a WHERE granted AND pid = " + pid),
            "marker,id,N=4,k=3,in")
      << "the turnstile is let go once granted";
  EXPECT_EQ(server.value("SELECT pg_locks.mode FROM pg_locks WHERE pid = " + pid +
                         " AND locktype = 'advisory' AND objid = ((" +
                         pg_lock_id_sql("media", "encoders") + ") & 4294967295)::oid"),
            "ShareLock");
}

TEST(PostgresSemaphore, AKilledHoldersPermitsGoToAWaiter) {
  PostgresServer server;
  Client holder = Client::open(server.uri(), unhurried_options());
  Client next = Client::open(server.uri(), unhurried_options());
  LockOptions options;
  options.ttl = 30s;  // the permits must come free long before the TTL could run out
  Lease all = holder.semaphore("media", "encoders", 2, options).acquire(2, Wait::none());
  ASSERT_TRUE(all);
  auto waiting = std::async(std::launch::async, [&] {
    return next.semaphore("media", "encoders", 2, options).acquire(1, Wait::up_to(60s));
  });
  ASSERT_TRUE(
      eventually([&] { return next.inspect("media", "encoders").waiters.size() == 1; }, kQueued));
  server.query("SELECT pg_terminate_backend(" + session_of(server, all.token()) + ")");
  ASSERT_EQ(waiting.wait_for(10s), std::future_status::ready) << "still held by a dead session";
  Lease granted = waiting.get();
  ASSERT_TRUE(granted);
  EXPECT_GT(granted.token(), all.token());
  EXPECT_TRUE(eventually([&] { return all.lost(); }, 30s)) << "the killed holder was not told";
}

// A grant's marker is held exclusive. The head of a semaphore's queue takes an older
// grant's marker shared for a moment, to learn that it is free, and a lock_timeout that
// lands just as that lock is granted leaves it held: a session lock outlives the aborted
// subtransaction. Such a hold must not make its session count as two grants. Here a
// session of the semaphore holds 1 of 2 permits and, beside its own marker, a released
// grant's marker shared: the other permit is still free.
TEST(PostgresSemaphore, AMarkerHeldSharedIsNotCountedAsAGrant) {
  PostgresServer server;
  Client client = Client::open(server.uri(), unhurried_options());
  Semaphore encoders = client.semaphore("media", "encoders", 2);
  Lease earlier = encoders.acquire(1, Wait::none());
  ASSERT_TRUE(earlier);
  const std::string stale = std::to_string(earlier.token());
  earlier.release();
  // The head the timeout left so, as a session of its own.
  auto head = std::async(std::launch::async, [&] {
    return server.query("SELECT warden.acquire_permits((" + pg_lock_id_sql("media", "encoders") +
                        "), 2, 1, false, 0, 60000);"
                        "SELECT pg_advisory_lock_shared(-" + stale + ");"
                        "SELECT pg_sleep(60)");
  });
  const std::string stale_held_shared =
      "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND mode = 'ShareLock' "
      "AND (classid::bigint << 32) | objid::bigint = -" + stale;
  ASSERT_TRUE(eventually([&] { return server.value(stale_held_shared).has_value(); }, 30s));
  Lease second = encoders.acquire(1, Wait::none());
  EXPECT_TRUE(second) << "the session holding 1 permit was counted as holding 2";
  EXPECT_FALSE(encoders.acquire(1, Wait::none())) << "both permits are held";
  server.query("SELECT pg_terminate_backend((" + stale_held_shared + "))");
  EXPECT_THROW(head.get(), std::runtime_error) << "its session was ended";
}

TEST(PostgresSemaphore, NothingIsLeftOnceEveryGrantIsReleased) {
  PostgresServer server;
  Client a = Client::open(server.uri(), unhurried_options());
  Client b = Client::open(server.uri(), unhurried_options());
  Semaphore sa = a.semaphore("media", "encoders", 4);
  Lease three = sa.acquire(3, Wait::none());
  Lease one = b.semaphore("media", "encoders", 4).acquire(1, Wait::none());
  ASSERT_TRUE(three && one);
  EXPECT_FALSE(b.semaphore("media", "encoders", 4).acquire(1, Wait::up_to(100ms)))
      << "all 4 are held";
  three.release();
  one.release();
  EXPECT_EQ(advisory_state(server), std::vector<std::string>{})
      << "a pooled session kept a semaphore key or a marker";
  const LockStatus free = a.inspect("media", "encoders");
  EXPECT_TRUE(free.holders.empty() && free.waiters.empty());
  EXPECT_EQ(free.permits, 0u);
  // Forgotten: an idle semaphore may be opened with another number of permits.
  EXPECT_TRUE(b.semaphore("media", "encoders", 6).acquire(6, Wait::none()));
}

TEST(PostgresSemaphore, AnotherNumberOfPermitsOrALockOfTheNameChangesNothing) {
  PostgresServer server;
  Client a = Client::open(server.uri(), unhurried_options());
  Client b = Client::open(server.uri(), unhurried_options());
  Lease held = a.semaphore("media", "encoders", 4).acquire(1, Wait::none());
  ASSERT_TRUE(held);
  const auto before = advisory_state(server);
  const Error other_n =
      error_of([&] { Lease l = b.semaphore("media", "encoders", 5).acquire(1, Wait::up_to(5s)); });
  EXPECT_EQ(other_n.code(), Errc::invalid_argument) << other_n.what();
  EXPECT_NE(std::string(other_n.what()).find("another number of permits"), std::string::npos)
      << other_n.what();
  for (const Mode mode : {Mode::exclusive, Mode::shared}) {
    const Error lock =
        error_of([&] { Lease l = b.lock("media", "encoders").acquire(mode, Wait::up_to(5s)); });
    EXPECT_EQ(lock.code(), Errc::invalid_argument) << lock.what();
    EXPECT_NE(std::string(lock.what()).find("semaphore in use"), std::string::npos) << lock.what();
  }
  EXPECT_EQ(advisory_state(server), before) << "a refused request left something behind";
  EXPECT_FALSE(held.lost());
  EXPECT_TRUE(b.semaphore("media", "encoders", 4).acquire(3, Wait::none()));
}

TEST(PostgresSemaphore, AWaitingLockOfTheNameRefusesASemaphore) {
  PostgresServer server;
  Client a = Client::open(server.uri(), unhurried_options());
  Client b = Client::open(server.uri(), unhurried_options());
  Client c = Client::open(server.uri(), unhurried_options());
  Lease lock = a.lock("media", "encoders").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lock);
  auto waiting = std::async(std::launch::async, [&] {
    return b.lock("media", "encoders").acquire(Mode::exclusive, Wait::up_to(60s));
  });
  ASSERT_TRUE(
      eventually([&] { return c.inspect("media", "encoders").waiters.size() == 1; }, kQueued));
  lock.release();
  const Error e =
      error_of([&] { Lease l = c.semaphore("media", "encoders", 2).acquire(1, Wait::none()); });
  EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
  EXPECT_TRUE(waiting.get()) << "the waiting lock is granted";
}

TEST(PostgresRegistry, AnInstallationOfTheFirstVersionGetsTheTablesOfSemaphoresAndElections) {
  PostgresServer server;
  (void)Client::open(server.uri(), unhurried_options());
  server.query(
      "DROP TABLE warden.leaders; ALTER TABLE warden.locks DROP COLUMN semaphore_permits;"
      "COMMENT ON FUNCTION warden.grant(bigint,boolean,boolean,integer,integer) IS "
      "'warden registry 1'");
  Client client = Client::open(server.uri(), unhurried_options());
  EXPECT_TRUE(client.semaphore("media", "encoders", 2).acquire(2, Wait::none()));
  EXPECT_TRUE(client.election("cron", "scheduler").campaign("x", Wait::none()));
  EXPECT_EQ(server.value("SELECT count(*) FROM warden.leaders"), "1");
}

}  // namespace
}  // namespace warden::testing

// Tests of `warden bench` and `warden status`: the latency statistics on known
// samples, and short end-to-end runs of the built binary against mem://, a throwaway
// redis-server (the baseline) and a throwaway wardend.

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/stats.h"
#include "core/uri.h"
#include "process.h"
#include "support/mariadb_server.h"
#include "support/postgres_server.h"
#include "support/server_process.h"
#include "warden/client.h"

namespace warden::cli {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using Args = std::vector<std::string>;

const std::string kWarden = WARDEN_CLI_PATH;

testing::Outcome warden(const Args& args, std::chrono::milliseconds timeout = 30s) {
  Args argv = {kWarden};
  argv.insert(argv.end(), args.begin(), args.end());
  return testing::run(argv, testing::environment({"WARDEN_URL"}), timeout);
}

bench::Samples iota(std::int64_t from, std::int64_t to) {
  bench::Samples s;
  for (std::int64_t v = from; v <= to; ++v) s.push_back(v);
  return s;
}

// --- statistics ------------------------------------------------------------------

TEST(BenchStats, PercentilesUseTheNearestRankOfSortedSamples) {
  const bench::Samples hundred = iota(1, 100);
  EXPECT_EQ(bench::percentile(hundred, 0.50), 50);
  EXPECT_EQ(bench::percentile(hundred, 0.99), 99);
  EXPECT_EQ(bench::percentile(hundred, 0.999), 100);
  EXPECT_EQ(bench::percentile(hundred, 1.0), 100);
  EXPECT_EQ(bench::percentile(hundred, 0.001), 1);

  const bench::Samples thousand = iota(1, 1000);
  EXPECT_EQ(bench::percentile(thousand, 0.50), 500);
  EXPECT_EQ(bench::percentile(thousand, 0.99), 990);
  EXPECT_EQ(bench::percentile(thousand, 0.999), 999);
}

TEST(BenchStats, PercentileOfOneSampleIsThatSample) {
  const bench::Samples one = {42};
  EXPECT_EQ(bench::percentile(one, 0.5), 42);
  EXPECT_EQ(bench::percentile(one, 0.999), 42);
}

TEST(BenchStats, NoSamplesGiveZeros) {
  bench::Samples none;
  EXPECT_EQ(bench::percentile(none, 0.5), 0);
  const bench::LatencySummary s = bench::summarize(none);
  EXPECT_EQ(s.count, 0u);
  EXPECT_EQ(s.p50_ns, 0);
  EXPECT_EQ(s.max_ns, 0);
}

TEST(BenchStats, SummarizeSortsFirst) {
  // 1..10 shuffled, plus one outlier: p99 and p99.9 land on it, p50 does not.
  bench::Samples s = {7, 3, 10, 1, 9, 2, 8, 5, 4, 6, 1000};
  const bench::LatencySummary sum = bench::summarize(s);
  EXPECT_EQ(sum.count, 11u);
  EXPECT_EQ(sum.min_ns, 1);
  EXPECT_EQ(sum.p50_ns, 6);  // rank ceil(5.5) = 6
  EXPECT_EQ(sum.p99_ns, 1000);
  EXPECT_EQ(sum.p999_ns, 1000);
  EXPECT_EQ(sum.max_ns, 1000);
  EXPECT_DOUBLE_EQ(sum.mean_ns, 1055.0 / 11.0);
}

TEST(BenchStats, MergeKeepsEverySampleOfEveryThread) {
  std::vector<bench::Samples> parts = {{3, 1}, {}, {2, 5, 4}};
  bench::Samples all = bench::merge(parts);
  ASSERT_EQ(all.size(), 5u);
  const bench::LatencySummary sum = bench::summarize(all);
  EXPECT_EQ(sum.min_ns, 1);
  EXPECT_EQ(sum.p50_ns, 3);
  EXPECT_EQ(sum.max_ns, 5);
  for (const auto& part : parts) EXPECT_TRUE(part.empty());
}

// --- end to end --------------------------------------------------------------------

void expect_phase(const json& phase, const std::string& url) {
  EXPECT_EQ(phase.at("url"), url);
  EXPECT_GT(phase.at("cycles").get<std::uint64_t>(), 0u);
  EXPECT_GT(phase.at("cycles_per_s").get<double>(), 0.0);
  const json& lat = phase.at("acquire_us");
  EXPECT_EQ(lat.at("samples"), phase.at("cycles"));
  EXPECT_LE(lat.at("p50").get<double>(), lat.at("p99").get<double>());
  EXPECT_LE(lat.at("p99").get<double>(), lat.at("p99_9").get<double>());
  EXPECT_LE(lat.at("p99_9").get<double>(), lat.at("max").get<double>());
}

TEST(WardenBench, MemRunReportsCyclesLatenciesAndHandOffAsJson) {
  const auto o = warden({"bench", "--url", "mem://", "--clients", "2", "--duration", "1s",
                         "--handoff-samples", "50", "--json"});
  ASSERT_EQ(o.status, 0) << o.err;
  const json j = json::parse(o.out);
  EXPECT_EQ(j.at("clients"), 2);
  EXPECT_EQ(j.at("keys"), 1);
  EXPECT_EQ(j.at("mode"), "exclusive");
  EXPECT_EQ(j.at("contended"), false);
  EXPECT_EQ(j.at("releases_confirmed"), false);
  EXPECT_DOUBLE_EQ(j.at("duration_s").get<double>(), 1.0);
  expect_phase(j.at("warden"), "mem://");
  EXPECT_TRUE(j.at("baseline").is_null());
  EXPECT_TRUE(j.at("ratio_cycles_per_s").is_null());
  EXPECT_EQ(j.at("handoff_us").at("samples"), 50);
  EXPECT_GT(j.at("handoff_us").at("p50").get<double>(), 0.0);
  // Not a terminal: no progress line.
  EXPECT_EQ(o.err, "");
}

TEST(WardenBench, BaselineRunsTheRawRedisLockInTheSameRun) {
  warden::testing::TempDir dir("warden-bench-redis");
  const std::uint16_t port = warden::testing::free_port();
  warden::testing::ServerProcess redis({"redis-server", "--port", std::to_string(port), "--bind",
                                        "127.0.0.1", "--save", "", "--appendonly", "no"},
                                       dir.path() / "redis.log");
  redis.start();
  ASSERT_TRUE(warden::testing::wait_for_port(port, 10s)) << redis.log_text();
  const std::string redis_url = "redis://127.0.0.1:" + std::to_string(port);

  const auto o =
      warden({"bench", "--url", "mem://", "--clients", "2", "--duration", "1s", "--contended",
              "--rounds", "2", "--handoff-samples", "0", "--baseline", redis_url, "--confirm-releases",
              "--json"});
  ASSERT_EQ(o.status, 0) << o.err;
  const json j = json::parse(o.out);
  EXPECT_EQ(j.at("contended"), true);
  EXPECT_EQ(j.at("releases_confirmed"), true);
  EXPECT_EQ(j.at("rounds"), 2);
  expect_phase(j.at("warden"), "mem://");
  expect_phase(j.at("baseline"), redis_url);
  EXPECT_EQ(j.at("baseline").at("mode"), "exclusive");
  const double ratio = j.at("warden").at("cycles_per_s").get<double>() /
                       j.at("baseline").at("cycles_per_s").get<double>();
  EXPECT_NEAR(j.at("ratio_cycles_per_s").get<double>(), ratio, 1e-9);
  EXPECT_TRUE(j.at("handoff_us").is_null());
}

TEST(WardenBench, BaselineCanBeWardenItselfAtAnotherUrl) {
  // How the transport alone costs (plain against TLS) is measured this way: the same
  // engine and workload on both sides of the ratio.
  warden::testing::Wardend server;
  const auto o = warden({"bench", "--url", "mem://", "--duration", "1s", "--rounds", "2",
                         "--handoff-samples", "0", "--baseline", server.uri(), "--json"});
  ASSERT_EQ(o.status, 0) << o.err;
  const json j = json::parse(o.out);
  expect_phase(j.at("baseline"), server.uri());
  EXPECT_EQ(j.at("baseline").at("lock"), "warden:// engine");
  EXPECT_GT(j.at("ratio_cycles_per_s").get<double>(), 0);
}

TEST(WardenBench, PermitsCycleASemaphoreAgainstLocksOfTheSameEngine) {
  // Three clients on one semaphore of two permits: the third waits its turn. The
  // baseline is the same wardend's lock, so the ratio is what a permit costs.
  warden::testing::Wardend server;
  const auto o = warden({"bench", "--url", server.uri(), "--permits", "2", "--clients", "3",
                         "--contended", "--duration", "1s", "--rounds", "2", "--handoff-samples",
                         "0", "--baseline", server.uri(), "--json"});
  ASSERT_EQ(o.status, 0) << o.err;
  const json j = json::parse(o.out);
  EXPECT_EQ(j.at("mode"), "semaphore");
  EXPECT_EQ(j.at("permits"), 2);
  expect_phase(j.at("warden"), server.uri());
  expect_phase(j.at("baseline"), server.uri());
  EXPECT_GT(j.at("ratio_cycles_per_s").get<double>(), 0);
  const auto text = warden({"bench", "--url", server.uri(), "--permits", "2", "--duration", "200ms",
                            "--handoff-samples", "0"});
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("mode 1 permit of a semaphore of 2"), std::string::npos) << text.out;
}

TEST(WardenBench, PermitsWithAModeOrZeroAreUsageErrors) {
  const auto mode = warden({"bench", "--url", "mem://", "--permits", "2", "--mode", "shared",
                            "--duration", "100ms", "--handoff-samples", "0"});
  EXPECT_EQ(mode.status, 64) << mode.err;
  EXPECT_NE(mode.err.find("contradicts --permits"), std::string::npos) << mode.err;
  const auto zero = warden({"bench", "--url", "mem://", "--permits", "0"});
  EXPECT_EQ(zero.status, 64) << zero.err;
}

TEST(WardenBench, MembersCycleMultiLocksAgainstOneLockOfTheSameEngine) {
  // Three clients over the same four keys, two members each: their multi-locks overlap,
  // so they contend (and would deadlock without the one global order).
  warden::testing::Wardend server;
  const auto o = warden({"bench", "--url", server.uri(), "--members", "2", "--keys", "4",
                         "--clients", "3", "--contended", "--duration", "1s", "--rounds", "2",
                         "--handoff-samples", "0", "--baseline", server.uri(), "--json"});
  ASSERT_EQ(o.status, 0) << o.err;
  const json j = json::parse(o.out);
  EXPECT_EQ(j.at("members"), 2);
  expect_phase(j.at("warden"), server.uri());
  expect_phase(j.at("baseline"), server.uri());
  EXPECT_GT(j.at("ratio_cycles_per_s").get<double>(), 0);
  const auto text = warden({"bench", "--url", "mem://", "--members", "8", "--keys", "8",
                            "--duration", "200ms", "--handoff-samples", "0"});
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("a multi-lock of 8 exclusive locks"), std::string::npos) << text.out;
}

TEST(WardenBench, CacheCyclesCachedLocksAndTimesTheHandOffFromACachedLock) {
  warden::testing::Wardend server;
  const auto o = warden({"bench", "--url", server.uri(), "--cache", "--clients", "2", "--duration",
                         "1s", "--handoff-samples", "20", "--json"});
  ASSERT_EQ(o.status, 0) << o.err;
  const json j = json::parse(o.out);
  EXPECT_EQ(j.at("cache"), true);
  EXPECT_EQ(j.at("releases_confirmed"), false);
  expect_phase(j.at("warden"), server.uri());
  EXPECT_EQ(j.at("handoff_us").at("samples"), 20);
  EXPECT_GT(j.at("handoff_us").at("p50").get<double>(), 0.0);
  const auto text = warden({"bench", "--url", server.uri(), "--cache", "--duration", "200ms",
                            "--handoff-samples", "5"});
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("releases cached"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("hand-off to a client asking for a cached lock"), std::string::npos)
      << text.out;
}

TEST(WardenBench, CacheWhereTheEngineCannotOrWithSemaphoresIsRefused) {
  const auto mem = warden({"bench", "--url", "mem://", "--cache", "--duration", "200ms",
                           "--handoff-samples", "0"});
  EXPECT_NE(mem.status, 0);
  EXPECT_NE(mem.err.find("cannot cache locks"), std::string::npos) << mem.err;
  for (const char* other : {"--confirm-releases", "--permits=2", "--members=2"}) {
    const auto o = warden({"bench", "--url", "mem://", "--cache", other, "--keys", "2"});
    EXPECT_EQ(o.status, 64) << other << ": " << o.err;
  }
}

TEST(WardenBench, MembersBeyondTheKeysOrWithPermitsOrMixedAreUsageErrors) {
  const auto keys = warden({"bench", "--url", "mem://", "--members", "3", "--keys", "2"});
  EXPECT_EQ(keys.status, 64) << keys.err;
  EXPECT_NE(keys.err.find("at least --members"), std::string::npos) << keys.err;
  const auto permits =
      warden({"bench", "--url", "mem://", "--members", "2", "--keys", "2", "--permits", "2"});
  EXPECT_EQ(permits.status, 64) << permits.err;
  const auto mixed =
      warden({"bench", "--url", "mem://", "--members", "2", "--keys", "2", "--mode", "mixed"});
  EXPECT_EQ(mixed.status, 64) << mixed.err;
  EXPECT_EQ(warden({"bench", "--url", "mem://", "--members", "1"}).status, 64);
}

TEST(WardenBench, ElectionFailoverKillsLeaderProcessesAndTimesTheNextLeader) {
  warden::testing::Wardend server;
  const auto o = warden({"bench", "--url", server.uri(), "--election-failover", "2", "--ttl",
                         "300ms", "--json"});
  ASSERT_EQ(o.status, 0) << o.err;
  const json j = json::parse(o.out);
  EXPECT_EQ(j.at("check"), "election_failover");
  EXPECT_EQ(j.at("samples"), 2);
  EXPECT_EQ(j.at("ttl_ms"), 300);
  EXPECT_GT(j.at("failover_min_ns").get<std::int64_t>(), 0);
  EXPECT_GE(j.at("failover_max_ns").get<std::int64_t>(), j.at("failover_p50_ns").get<std::int64_t>());
  EXPECT_GT(j.at("observed_p50_ns").get<std::int64_t>(), 0);
  EXPECT_GE(j.at("observed_max_ns").get<std::int64_t>(), j.at("observed_p50_ns").get<std::int64_t>());
  // The killed leaders' processes left nothing behind: the election is free again.
  Client client = Client::open(server.uri());
  EXPECT_EQ(client.election("bench", "failover").leader(), std::nullopt);
  // Only --ttl goes with it.
  EXPECT_EQ(warden({"bench", "--url", server.uri(), "--election-failover", "1", "--clients", "2"})
                .status,
            64);
}

// mem:// waits without a thread: the waiting process gains at most the table's driver
// and the completion threads, whatever the number of waits.
TEST(WardenBench, AsyncWaitersAreGrantedInOrderAndCancelledWithoutAThreadEach) {
  const auto o = warden({"bench", "--url", "mem://", "--async-waiters", "500", "--json"});
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  const json j = json::parse(o.out);
  EXPECT_EQ(j.at("check"), "async_waiters");
  EXPECT_EQ(j.at("waiters"), 500);
  EXPECT_EQ(j.at("granted"), 500);
  EXPECT_EQ(j.at("one_lock_granted"), 500);
  EXPECT_TRUE(j.at("fifo_asked").get<bool>());
  EXPECT_TRUE(j.at("one_lock_fifo").get<bool>());
  EXPECT_EQ(j.at("cancelled"), 500);
  EXPECT_EQ(j.at("left_waiting"), 0);
  EXPECT_EQ(j.at("failed"), 0);
  EXPECT_LE(j.at("threads_waiting").get<long>() - j.at("threads_before").get<long>(), 2);
  // A capacity check of its own: the timed run's options do not go with it.
  EXPECT_EQ(warden({"bench", "--url", "mem://", "--async-waiters", "5", "--clients", "2"}).status,
            64);
}

TEST(WardenBench, AsyncCyclesCompareOneThreadWithThreadsAtEachCount) {
  const auto o =
      warden({"bench", "--url", "mem://", "--async-cycles", "--duration", "300ms", "--json"});
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  const json j = json::parse(o.out);
  EXPECT_EQ(j.at("check"), "async_cycles");
  ASSERT_EQ(j.at("rows").size(), 3u);
  int expected[] = {1, 64, 1024};
  for (std::size_t i = 0; i < 3; ++i) {
    const json& row = j.at("rows")[i];
    EXPECT_EQ(row.at("in_flight"), expected[i]);
    EXPECT_GT(row.at("async_per_second").get<double>(), 0);
    EXPECT_GT(row.at("blocking_per_second").get<double>(), 0);
    EXPECT_EQ(row.at("async_failed"), 0);
    EXPECT_EQ(row.at("blocking_failed"), 0);
  }
  // Only --duration goes with it.
  EXPECT_EQ(warden({"bench", "--url", "mem://", "--async-cycles", "--clients", "2"}).status, 64);
}

TEST(WardenBench, PostgresBaselineRunsRawAdvisoryLocksInTheSameRun) {
  warden::testing::PostgresServer pg;
  const std::string url = pg.uri();
  const auto o = warden({"bench", "--url", url, "--clients", "2", "--duration", "1s", "--rounds",
                         "2", "--handoff-samples", "0", "--baseline", url, "--json"});
  ASSERT_EQ(o.status, 0) << o.err;
  const json j = json::parse(o.out);
  const std::string shown = core::Uri::parse(url).redacted();
  expect_phase(j.at("warden"), shown);
  expect_phase(j.at("baseline"), shown);
  EXPECT_EQ(j.at("baseline").at("lock"), "pg_advisory_lock + pg_advisory_unlock");
  EXPECT_GT(j.at("ratio_cycles_per_s").get<double>(), 0);
  // Every lock of both sides was released: no session holds an advisory lock.
  EXPECT_EQ(pg.value("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"), "0");
}

TEST(WardenBench, MysqlBaselineRunsRawGetLockPairsInTheSameRun) {
  warden::testing::MariaDbServer db;
  const std::string url = db.uri();
  const auto o = warden({"bench", "--url", url, "--clients", "2", "--duration", "1s", "--rounds",
                         "2", "--handoff-samples", "0", "--baseline", url, "--json"});
  ASSERT_EQ(o.status, 0) << o.err;
  const json j = json::parse(o.out);
  const std::string shown = core::Uri::parse(url).redacted();
  expect_phase(j.at("warden"), shown);
  expect_phase(j.at("baseline"), shown);
  EXPECT_EQ(j.at("baseline").at("lock"), "GET_LOCK + RELEASE_LOCK");
  EXPECT_EQ(j.at("baseline").at("mode"), "exclusive");
  EXPECT_GT(j.at("ratio_cycles_per_s").get<double>(), 0);
  // The baseline's names never entered warden's registry: only the two warden locks
  // (one per client) are there.
  EXPECT_EQ(db.scalar("SELECT COUNT(*) FROM warden.warden_locks"), "2");
  EXPECT_EQ(db.scalar("SELECT COUNT(*) FROM warden.warden_locks WHERE name LIKE '%wbench%'"), "0");
}

TEST(WardenBench, MysqlBaselineWithRefusedCredentialsExits77BeforeAnyRun) {
  warden::testing::MariaDbServer db;
  const auto o = warden({"bench", "--url", "mem://", "--duration", "60s", "--baseline",
                         db.uri_as("warden", "wrong-password")});
  EXPECT_EQ(o.status, 77) << o.err;
  EXPECT_LT(o.elapsed, 30s) << "the warden run started before the baseline was checked";
}

TEST(WardenBench, UnreachableBaselineFailsBeforeAnyRun) {
  // A 60 s run: failing well before it could have ended shows that no run started.
  const auto o = warden({"bench", "--url", "mem://", "--duration", "60s", "--baseline",
                         "redis://127.0.0.1:" + std::to_string(warden::testing::free_port())});
  EXPECT_EQ(o.status, 69) << o.err;
  EXPECT_NE(o.err.find("unavailable"), std::string::npos) << o.err;
  EXPECT_LT(o.elapsed, 30s) << "the warden run started before the baseline was checked";
}

TEST(WardenBench, BadInputIsAUsageError) {
  EXPECT_EQ(warden({"bench", "--url", "mem://", "--mode", "upgrade"}).status, 64);
  EXPECT_EQ(warden({"bench", "--url", "mem://", "--duration", "10"}).status, 64);
  EXPECT_EQ(warden({"bench", "--url", "mem://", "--clients", "0"}).status, 64);
  EXPECT_EQ(warden({"bench", "--url", "nope://x"}).status, 64);
  EXPECT_EQ(warden({"bench", "--url", "mem://", "--hold-locks", "10"}).status, 64);
  EXPECT_EQ(warden({"bench", "--url", "mem://", "--hold-locks", "10", "--clients", "2"}).status,
            64);
}

TEST(WardenStatus, ShowsServerInfoAndOneLocksHolders) {
  warden::testing::Wardend server;
  Client client = Client::open(server.uri());
  Lease lease = client.lock("orders", "o-42").acquire(Mode::exclusive);
  ASSERT_TRUE(lease);

  const auto info = warden({"status", "--url", server.uri(), "--json"});
  ASSERT_EQ(info.status, 0) << info.err;
  const json i = json::parse(info.out);
  EXPECT_EQ(i.at("info").at("server"), "wardend");
  EXPECT_GE(i.at("info").at("holders").get<int>(), 1);
  EXPECT_GE(i.at("info").at("connections").get<int>(), 1);

  const auto lock =
      warden({"status", "--url", server.uri(), "--group", "orders", "--name", "o-42", "--json"});
  ASSERT_EQ(lock.status, 0) << lock.err;
  const json l = json::parse(lock.out);
  EXPECT_EQ(l.at("lock"), "orders/o-42");
  ASSERT_EQ(l.at("holders").size(), 1u);
  EXPECT_EQ(l.at("holders")[0].at("mode"), "exclusive");
  EXPECT_EQ(l.at("holders")[0].at("token").get<std::uint64_t>(), lease.token());
  EXPECT_GT(l.at("holders")[0].at("ttl_left_ms").get<int>(), 0);
  EXPECT_TRUE(l.at("waiters").empty());

  const auto table =
      warden({"status", "--url", server.uri(), "--group", "orders", "--name", "o-42"});
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("exclusive"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(std::to_string(lease.token())), std::string::npos) << table.out;
}

TEST(WardenStatus, InfoOfOtherEnginesAndANameWithoutGroupAreUsageErrors) {
  // INFO (no --group) is wardend's; every engine answers --group [--name].
  const auto mem = warden({"status", "--url", "mem://"});
  EXPECT_EQ(mem.status, 64);
  EXPECT_NE(mem.err.find("warden://"), std::string::npos) << mem.err;
  EXPECT_EQ(warden({"status", "--url", "warden://127.0.0.1:1", "--name", "n"}).status, 64);
  // --group alone lists the group: a valid request, so an unreachable server is 69.
  EXPECT_EQ(warden({"status", "--url", "warden://127.0.0.1:1", "--group", "g"}).status, 69);
}

TEST(WardenStatus, UnreachableServerExits69) {
  const auto o = warden(
      {"status", "--url", "warden://127.0.0.1:" + std::to_string(warden::testing::free_port())});
  EXPECT_EQ(o.status, 69) << o.err;
}

}  // namespace
}  // namespace warden::cli

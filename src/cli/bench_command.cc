#include "cli/bench_command.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>

#include "bench/async_cycles.h"
#include "bench/async_waiters.h"
#include "bench/capacity.h"
#include "bench/redis_baseline.h"
#include "bench/report.h"
#include "bench/run.h"
#include "bench/workload.h"
#include "cli/duration.h"
#include "cli/engine_modules.h"
#include "cli/exit_codes.h"
#include "cli/failure.h"
#include "cli/print.h"
#include "core/uri.h"
#include "warden/error.h"

namespace warden::cli {
namespace {

using namespace std::chrono_literals;

// Bound of one baseline command and of each step of the hand-off protocol.
constexpr auto kBaselineTimeout = 5s;
constexpr auto kHandoffStepTimeout = 10s;
// Pipelined commands per round trip in the memory check.
constexpr std::size_t kHoldLocksBatch = 10'000;
constexpr auto kMaxDuration = 24h;

struct BenchPlan {
  std::string url;
  std::string url_text;  // redacted, for output
  bench::Workload workload;
  std::chrono::nanoseconds duration{0};
  std::string baseline;
  std::string baseline_text;
  int handoff_samples = 0;
  int rounds = 1;
  bool json = false;
};

std::chrono::nanoseconds duration_option(std::string_view option, const std::string& text) {
  try {
    return parse_duration(text);
  } catch (const DurationError& e) {
    throw Failure(exit_code::kUsage, option, e.what());
  }
}

std::string redacted(std::string_view option, const std::string& url) {
  try {
    return core::Uri::parse(url).redacted();
  } catch (const Error& e) {
    throw Failure::from(option, e);
  }
}

std::string make_run_id() {
  std::random_device rd;
  char text[32];
  std::snprintf(text, sizeof text, "r%ld-%04x", static_cast<long>(getpid()), rd() & 0xffffu);
  return text;
}

BenchPlan make_plan(const BenchOptions& o) {
  BenchPlan plan;
  plan.url = o.url;
  if (plan.url.empty()) {
    if (const char* env = std::getenv("WARDEN_URL")) plan.url = env;
  }
  if (plan.url.empty()) {
    throw Failure(exit_code::kUsage, "--url", "not given, and WARDEN_URL is not set");
  }
  plan.url_text = redacted("--url", plan.url);
  plan.json = o.json;

  bench::Workload& w = plan.workload;
  w.clients = o.clients;
  w.keys = o.keys;
  w.contended = o.contended;
  w.confirm_releases = o.confirm_releases;
  w.cache = o.cache;
  if (o.mode == "exclusive") {
    w.mix = bench::LockMix::exclusive;
  } else if (o.mode == "shared") {
    w.mix = bench::LockMix::shared;
  } else if (o.mode == "mixed") {
    w.mix = bench::LockMix::mixed;
  } else {
    throw Failure(exit_code::kUsage, "--mode",
                  "unknown mode \"" + printable(o.mode) + "\" (one of exclusive, shared, mixed)");
  }
  try {
    w.ttl = whole_milliseconds(duration_option("--ttl", o.ttl));
  } catch (const DurationError& e) {
    throw Failure(exit_code::kUsage, "--ttl", e.what());
  }
  if (w.ttl < 10ms || w.ttl > std::chrono::hours(24 * 7)) {
    throw Failure(exit_code::kUsage, "--ttl", "must be within 10ms..168h");
  }
  w.run_id = make_run_id();
  w.permits = o.permits;
  if (w.permits > 0 && o.mode != "exclusive") {
    throw Failure(exit_code::kUsage, "--mode", "contradicts --permits: a permit has no mode");
  }
  w.members = o.members;
  if (w.members > 0) {
    if (w.permits > 0) {
      throw Failure(exit_code::kUsage, "--members", "contradicts --permits");
    }
    if (w.mix == bench::LockMix::mixed) {
      throw Failure(exit_code::kUsage, "--mode",
                    "contradicts --members: a multi-lock's members share one mode");
    }
    if (w.keys < w.members) {
      throw Failure(exit_code::kUsage, "--keys", "must be at least --members");
    }
  }

  plan.duration = duration_option("--duration", o.duration);
  if (plan.duration <= plan.duration.zero() || plan.duration > kMaxDuration) {
    throw Failure(exit_code::kUsage, "--duration", "must be above 0 and at most 24h");
  }
  plan.baseline = o.baseline;
  if (!plan.baseline.empty()) {
    plan.baseline_text = redacted("--baseline", plan.baseline);
    const std::string scheme = core::Uri::parse(plan.baseline).scheme;
    if (scheme != "redis" && scheme != "redis+cluster" && scheme != "etcd" && scheme != "zk" &&
        scheme != "warden" && scheme != "wardens" && scheme != "postgres" &&
        scheme != "postgresql" && scheme != "mysql") {
      throw Failure(exit_code::kUsage, "--baseline",
                    "expected a redis://HOST:PORT, redis+cluster://H1:P1,..., etcd://HOST:PORT, "
                    "zk://HOST:PORT, "
                    "postgres://USER:PASS@HOST:PORT/DB, mysql://USER:PASS@HOST:PORT/DB or "
                    "warden(s)://HOST:PORT URL");
    }
  }
  plan.handoff_samples = o.handoff_samples;
  plan.rounds = o.rounds;
  if (plan.duration / plan.rounds < 1ms) {
    throw Failure(exit_code::kUsage, "--rounds", "leaves less than 1ms per round");
  }
  return plan;
}

// Runs `step`, turning a library error into a Failure that names `what`.
template <class F>
auto step(const std::string& what, F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    throw Failure::from(what, e);
  }
}

bench::PhaseFigures figures(const std::string& url, bench::RunResult& run) {
  bench::PhaseFigures f;
  f.url = url;
  f.cycles = run.cycles;
  f.seconds = std::chrono::duration<double>(run.elapsed).count();
  f.cycles_per_second = run.cycles_per_second();
  f.acquire = bench::summarize(run.acquire_ns);
  return f;
}

int hold_locks(const BenchOptions& o, const BenchPlan& plan) {
  if (o.key_bytes < std::to_string(o.hold_locks).size()) {
    throw Failure(exit_code::kUsage, "--key-bytes",
                  "too short for " + std::to_string(o.hold_locks) + " distinct names");
  }
  const auto result = step("hold locks on " + plan.url_text, [&] {
    return bench::hold_locks(plan.url, o.hold_locks, o.key_bytes, kHoldLocksBatch);
  });
  print(plan.json ? bench::format_json(plan.url_text, result)
                  : bench::format_text(plan.url_text, result));
  return exit_code::kOk;
}

int election_failover(const BenchPlan& plan, int samples) {
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) throw Failure(exit_code::kInternal, "bench", "cannot find the warden executable");
  auto result = step("election failover on " + plan.url_text, [&] {
    return bench::election_failover(plan.url, self.string(), samples, plan.workload.ttl);
  });
  print(plan.json ? bench::format_json(plan.url_text, result)
                  : bench::format_text(plan.url_text, result));
  return exit_code::kOk;
}

int async_waiters(const BenchPlan& plan, std::uint64_t waiters) {
  const auto result = step(std::to_string(waiters) + " asynchronous waits on " + plan.url_text,
                           [&] { return bench::async_waiters(plan.url, waiters); });
  print(plan.json ? bench::format_json(plan.url_text, result)
                  : bench::format_text(plan.url_text, result));
  const bool all = result.granted == waiters && result.one_lock_granted == waiters &&
                   result.cancelled == waiters && result.failed == 0 && result.left_waiting == 0;
  return all ? exit_code::kOk : exit_code::kUnavailable;
}

int async_cycles(const BenchPlan& plan) {
  const auto result = step("asynchronous and blocking cycles on " + plan.url_text, [&] {
    return bench::async_cycles(plan.url, {1, 64, 1024}, plan.duration);
  });
  print(plan.json ? bench::format_json(plan.url_text, result)
                  : bench::format_text(plan.url_text, result));
  return exit_code::kOk;
}

int idle_connections(const BenchOptions& o, const BenchPlan& plan) {
  const auto hold = whole_milliseconds(duration_option("--idle-hold", o.idle_hold));
  const auto result = step("idle connections to " + plan.url_text, [&] {
    return bench::idle_connections(plan.url, o.idle_connections, hold);
  });
  print(plan.json ? bench::format_json(plan.url_text, result)
                  : bench::format_text(plan.url_text, result));
  return result.ok() ? exit_code::kOk : exit_code::kUnavailable;
}

// The baseline's workload: the same, with one lock per cycle where the measured side
// has semaphores or multi-locks.
bench::Workload locks_only(bench::Workload w) {
  w.permits = 0;
  w.members = 0;
  return w;
}

}  // namespace

int run_bench(const BenchOptions& options) {
  const BenchPlan plan = make_plan(options);
  if (options.hold_locks > 0) return hold_locks(options, plan);
  if (options.idle_connections > 0) return idle_connections(options, plan);
  if (options.election_failover > 0) return election_failover(plan, options.election_failover);
  if (options.async_waiters > 0) return async_waiters(plan, options.async_waiters);
  if (options.async_cycles) return async_cycles(plan);

  const bench::Workload& w = plan.workload;
  // Everything is opened first, so a backend that is down fails the command at once.
  auto warden_clients =
      step("connect " + plan.url_text, [&] { return bench::open_warden_clients(plan.url, w); });
  std::vector<std::unique_ptr<bench::CycleClient>> baseline_clients;
  if (!plan.baseline.empty()) {
    baseline_clients = step("connect " + plan.baseline_text, [&, w = locks_only(w)] {
      const std::string scheme = core::Uri::parse(plan.baseline).scheme;
      // warden:// against wardens:// (or another wardend): the same engine both ways, so
      // the ratio is what the transport costs.
      if (scheme == "warden" || scheme == "wardens") {
        return bench::open_warden_clients(plan.baseline, w);
      }
      // etcd, ZooKeeper, PostgreSQL and MariaDB are spoken through their own client
      // libraries, which only their engine modules link (cli/modules/).
      if (scheme != "redis" && scheme != "redis+cluster") {
        return module_baseline(scheme)(plan.baseline, w, kBaselineTimeout);
      }
      return bench::open_redis_clients(plan.baseline, w, kBaselineTimeout);
    });
  }

  const bool live = bench::stderr_is_terminal();
  bench::BenchReport report;
  report.workload = w;
  report.rounds = plan.rounds;
  report.duration_seconds = std::chrono::duration<double>(plan.duration).count();

  // With --rounds R the time is cut into R slices, warden and baseline taking turns,
  // so that a change of load on a shared machine hits both alike.
  const auto slice = plan.duration / plan.rounds;
  bench::RunResult run;
  bench::RunResult base;
  for (int round = 1; round <= plan.rounds; ++round) {
    const std::string of = plan.rounds > 1 ? " (round " + std::to_string(round) + "/" +
                                                 std::to_string(plan.rounds) + ")"
                                           : "";
    bench::accumulate(run, step("bench " + plan.url_text, [&] {
                        return bench::run_timed(warden_clients, slice, {live, plan.url_text + of});
                      }));
    if (baseline_clients.empty()) continue;
    bench::accumulate(base, step("baseline " + plan.baseline_text, [&] {
                        return bench::run_timed(baseline_clients, slice,
                                                {live, plan.baseline_text + " (baseline)" + of});
                      }));
  }
  warden_clients.clear();
  baseline_clients.clear();
  report.warden = figures(plan.url_text, run);
  if (!plan.baseline.empty()) report.baseline = figures(plan.baseline_text, base);

  if (plan.handoff_samples > 0) {
    if (live) std::fputs("hand-off samples...\r", stderr);
    auto samples = step("hand-off on " + plan.url_text, [&] {
      return bench::measure_handoff(plan.url, plan.handoff_samples, w, kHandoffStepTimeout);
    });
    if (live) std::fputs("\x1b[K", stderr);
    report.handoff = bench::summarize(samples);
  }

  print(plan.json ? bench::format_json(report) : bench::format_text(report));
  return exit_code::kOk;
}

void add_bench_command(Commands& commands) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App& app = commands.add(
      "bench", "Measure lock cycles/s and latency against a raw Redis baseline, or server capacity",
      [o] { return run_bench(*o); });

  app.add_option("--url", o->url, "Lock service URI (default: $WARDEN_URL)")->type_name("URL");
  auto* clients = app.add_option("--clients", o->clients,
                                 "Client threads, each with its own Client and connections")
                      ->type_name("N")
                      ->check(CLI::Range(1, 4096))
                      ->capture_default_str();
  auto* keys = app.add_option("--keys", o->keys, "Locks each client cycles over (see below)")
                   ->type_name("K")
                   ->check(CLI::Range(1, 1'000'000))
                   ->capture_default_str();
  auto* mode =
      app.add_option("--mode", o->mode, "exclusive, shared, or mixed (90% shared / 10% exclusive)")
          ->type_name("MODE")
          ->capture_default_str();
  auto* duration = app.add_option("--duration", o->duration, "How long each timed run lasts")
                       ->type_name("D")
                       ->capture_default_str();
  auto* permits =
      app.add_option("--permits", o->permits,
                     "Each key a semaphore of N permits, one taken per cycle (baseline: locks)")
          ->type_name("N")
          ->check(CLI::Range(1, 1'000'000));
  auto* members = app.add_option("--members", o->members,
                                 "Each cycle a multi-lock of M keys (2..1024; baseline: one lock)")
                      ->type_name("M")
                      ->check(CLI::Range(2, 1024));
  auto* contended = app.add_flag("--contended", o->contended,
                                 "All clients share the same K locks (default: K of their own)");
  auto* confirm = app.add_flag("--confirm-releases", o->confirm_releases,
                               "Each cycle waits for its release to be confirmed "
                               "(Lease::release; default: the lease is dropped, as unlock() does)");
  auto* cache = app.add_flag("--cache", o->cache,
                             "Every lock cached (LockOptions::cache): a client's repeated "
                             "cycles on a lock nobody else wants do no I/O");
  cache->excludes(confirm)->excludes(permits)->excludes(members);
  auto* ttl = app.add_option("--ttl", o->ttl, "Lease length of every grant")
                  ->type_name("D")
                  ->capture_default_str();
  auto* baseline =
      app.add_option("--baseline", o->baseline,
                     "Also run a baseline lock: raw Redis (SET NX PX + "
                     "compare-and-delete; on a cluster, each key on its slot's master), etcd's own "
                     "lock service (v3lock), raw "
                     "ZooKeeper create+delete pairs, raw PostgreSQL advisory lock or MariaDB "
                     "GET_LOCK pairs, or warden:// itself at another URL (e.g. plain "
                     "against TLS)")
          ->type_name(
              "redis://H:P|redis+cluster://H:P,...|etcd://H:P|zk://H:P|postgres://U:P@H:P/DB|"
              "mysql://U:P@H:P/DB|"
              "warden(s)://H:P");
  auto* rounds =
      app.add_option("--rounds", o->rounds,
                     "Cut --duration into R slices, warden and baseline taking turns (see below)")
          ->type_name("R")
          ->check(CLI::Range(1, 1000))
          ->capture_default_str();
  auto* handoff = app.add_option("--handoff-samples", o->handoff_samples,
                                 "Hand-off latency samples after the runs (0: skip)")
                      ->type_name("M")
                      ->check(CLI::Range(0, 1'000'000))
                      ->capture_default_str();
  app.add_flag("--json", o->json, "Print one JSON object with every figure");
  auto* hold = app.add_option("--hold-locks", o->hold_locks,
                              "wardend memory check: hold N locks, report bytes per lock")
                   ->type_name("N")
                   ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{100'000'000}));
  auto* key_bytes =
      app.add_option("--key-bytes", o->key_bytes, "With --hold-locks: bytes of each lock name")
          ->type_name("B")
          ->check(CLI::Range(std::size_t{1}, std::size_t{512}))
          ->capture_default_str();
  auto* idle = app.add_option("--idle-connections", o->idle_connections,
                              "wardend connection check: open, PING and hold N connections")
                   ->type_name("N")
                   ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1'000'000}));
  auto* idle_hold =
      app.add_option("--idle-hold", o->idle_hold, "With --idle-connections: how long to hold them")
          ->type_name("D")
          ->capture_default_str();
  auto* failover =
      app.add_option("--election-failover", o->election_failover,
                     "Election check: kill a leader process N times, time until the next leads "
                     "(--ttl 1s unless given)")
          ->type_name("N")
          ->check(CLI::Range(1, 1000));
  auto* waiting = app.add_option("--async-waiters", o->async_waiters,
                                  "Asynchronous check: N acquires waiting at once from one "
                                  "Client (threads, memory, grant, FIFO, cancel)")
                       ->type_name("N")
                       ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1'000'000}));
  auto* cycling = app.add_flag("--async-cycles", o->async_cycles,
                               "Asynchronous check: cycles/s at 1, 64 and 1024 in flight, "
                               "acquire_async from one thread against blocking threads");
  key_bytes->needs(hold);
  idle_hold->needs(idle);
  hold->excludes(idle);
  failover->excludes(hold)->excludes(idle);
  waiting->excludes(hold)->excludes(idle)->excludes(failover);
  cycling->excludes(hold)->excludes(idle)->excludes(failover)->excludes(waiting);
  // The capacity checks take none of the timed run's options. Checked at parse time,
  // but not with excludes(), which would list every pair in --help.
  const std::vector<CLI::Option*> run_options = {clients,  keys,    mode,      permits,  members,
                                                 duration, ttl,     contended, baseline, handoff,
                                                 rounds,   confirm, cache};
  app.callback([run_options, hold, idle, failover, waiting, cycling, duration, ttl, o] {
    // An election failover waits out a lease per sample: a short one unless asked.
    if (failover->count() > 0 && ttl->count() == 0) o->ttl = "1s";
    for (CLI::Option* capacity : {hold, idle, failover, waiting, cycling}) {
      if (capacity->count() == 0) continue;
      for (CLI::Option* option : run_options) {
        if (capacity == failover && option == ttl) continue;  // the lease it waits out
        if (capacity == cycling && option == duration) continue;  // each side's time
        if (option->count() > 0) {
          throw CLI::ValidationError(option->get_name() +
                                     " is for timed runs; it cannot be "
                                     "combined with " +
                                     capacity->get_name());
        }
      }
    }
  });

  app.footer(std::string(
      "Durations (D): a number with a unit, ns us ms s m h: 500ms, 10s, 1m.\n"
      "\n"
      "Timed runs: each client loops acquire (waiting as long as it takes) + release\n"
      "for --duration. Uncontended (default): client i cycles over its own K locks.\n"
      "--contended: all clients cycle over the same K locks. Reported: cycles/s of\n"
      "all clients together; acquire latency p50/p99/p99.9 over every acquire.\n"
      "A cycle drops its lease, as unlock() does: the release is sent and its answer\n"
      "read later. --confirm-releases waits for it (Lease::release()).\n"
      "\n"
      "--baseline redis://H:P runs the same clients, keys and duration on the lock\n"
      "every Redis tutorial shows: SET key value NX PX ttl, released by a compare-\n"
      "and-delete Lua script (EVALSHA). It has no queue: a SET NX that finds the key\n"
      "taken is retried after a random 0.1..1 ms sleep. It has no shared mode: it\n"
      "always locks exclusively. The report gives warden/baseline for cycles/s.\n"
      "--baseline redis+cluster://H1:P1,... runs it on a Redis Cluster, each client\n"
      "with a connection per master and each key sent to its slot's master.\n"
      "--baseline etcd://H:P runs etcd's own lock service instead (v3lockpb Lock +\n"
      "Unlock RPCs, one lease per client, exclusive only) on the URL's first member.\n"
      "--baseline zk://H:P runs raw ZooKeeper pairs: create(EPHEMERAL_SEQUENTIAL) +\n"
      "delete through the C client, one session per client: the floor of any ZK lock.\n"
      "--baseline postgres://U:P@H:P/DB runs raw pg_advisory_lock + pg_advisory_unlock\n"
      "pairs (two-int4 keys, which postgres:// never uses), one session per client.\n"
      "--baseline mysql://U:P@H:P/DB runs raw GET_LOCK + RELEASE_LOCK pairs on names\n"
      "under wbench: (mysql:// names start warden:), one session per client.\n"
      "\n"
      "Hand-off: client A holds a lock, client B queues for it; A waits 1 ms after B\n"
      "announced its acquire, takes t0 and releases; B takes t1 when granted. One\n"
      "sample = t1 - t0 on one clock. --handoff-samples pairs are measured.\n"
      "With --cache: A takes the lock and drops it (A keeps it cached); B takes t0,\n"
      "asks for it (the backend has A give it back) and takes t1 when granted.\n"
      "\n"
      "--permits N: every key is a semaphore of N permits and each cycle takes one\n"
      "(uncontended: K semaphores per client; --contended: K shared by all, so clients\n"
      "beyond N wait). The baseline still takes locks, and so does the hand-off: with\n"
      "--baseline at the same engine's URL the ratio is a permit's cost against a lock's.\n"
      "\n"
      "--members M: each cycle takes a multi-lock of M keys (the cycle's key and the\n"
      "M-1 after it, wrapping; needs --keys >= M) in --mode exclusive or shared. The\n"
      "baseline and the hand-off take one lock: the ratio is M members against one lock.\n"
      "\n"
      "Asynchronous check (any engine):\n"
      "  --async-waiters N  one Client asks for N held locks with acquire_async; once the\n"
      "                    backend lists them queued, this process's threads and RSS are\n"
      "                    read; the holder releases and all N must be granted. Then N\n"
      "                    waits on one lock (FIFO where the engine has it), granted one\n"
      "                    after another, and N waits cancelled together (time until all\n"
      "                    are told, waiters left). Exit 69 if any was not as it should be.\n"
      "\n"
      "Capacity checks (warden:// only, on raw connections):\n"
      "  --hold-locks N    acquires bench-mem/<i> (i zero-padded to --key-bytes) with\n"
      "                    a 10 min TTL, pipelined, and reports the server's RSS growth\n"
      "                    per lock (INFO rss_bytes); then releases them all.\n"
      "  --idle-connections N  opens N connections, PINGs each, checks INFO\n"
      "                    connections >= N, holds them --idle-hold, PINGs each again.\n"
      "                    Exit 69 if any step fails (the report names the first).\n"
      "\n"
      "Progress is shown on stderr once per second when it is a terminal.\n"
      "\n"
      "Examples:\n"
      "  warden bench --url warden://127.0.0.1:7380 --clients 8 --duration 10s "
      "--baseline redis://127.0.0.1:6379\n"
      "  warden bench --url warden://127.0.0.1:7380 --hold-locks 1000000\n"
      "\n"
      "Exit status:\n"
      "  0   the benchmark ran (the figures say how well)\n"
      "  64  usage error: bad option, duration or URL, or a mode the engine lacks\n"
      "  69  lock service or baseline unreachable or not answering; a capacity\n"
      "      check failed or hit a server limit\n"
      "  70  a lease was lost during a run (--ttl too short for the load)\n"
      "  71  internal error or unexpected reply\n"
      "  77  the service refused our credentials\n"));
}

}  // namespace warden::cli

#include "bench/report.h"

#include <fmt/core.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace warden::bench {
namespace {

using nlohmann::json;

json latency_json(const LatencySummary& s) {
  return json{{"samples", s.count},        {"min", to_us(s.min_ns)},    {"p50", to_us(s.p50_ns)},
              {"p99", to_us(s.p99_ns)},    {"p99_9", to_us(s.p999_ns)}, {"max", to_us(s.max_ns)},
              {"mean", s.mean_ns / 1000.0}};
}

json phase_json(const PhaseFigures& p) {
  return json{{"url", p.url},
              {"cycles", p.cycles},
              {"seconds", p.seconds},
              {"cycles_per_s", p.cycles_per_second},
              {"acquire_us", latency_json(p.acquire)}};
}

std::string keys_text(const Workload& w) {
  if (w.contended) {
    return fmt::format("{} key{} shared by all clients (contended)", w.keys,
                       w.keys == 1 ? "" : "s");
  }
  return fmt::format("{} key{} per client (uncontended)", w.keys, w.keys == 1 ? "" : "s");
}

std::string mode_text(const Workload& w) {
  if (w.permits > 0) {
    return fmt::format("1 permit of a semaphore of {} (the baseline: locks)", w.permits);
  }
  if (w.members > 1) {
    return fmt::format("a multi-lock of {} {} locks (the baseline: one lock)", w.members,
                       to_string(w.mix));
  }
  if (w.mix == LockMix::mixed) return "mixed (90% shared, 10% exclusive)";
  return std::string(to_string(w.mix));
}

std::string mib(std::uint64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

double per_second(double count, double seconds) { return seconds > 0 ? count / seconds : 0; }

}  // namespace

std::optional<double> BenchReport::ratio() const {
  if (!baseline || baseline->cycles_per_second <= 0) return std::nullopt;
  return warden.cycles_per_second / baseline->cycles_per_second;
}

namespace {

// What the baseline of `url` does differently from warden, for the reader of the ratio.
std::string baseline_notes(const std::string& url, const Workload& w) {
  std::string out;
  if (url.rfind("etcd://", 0) == 0) {
    if (w.mix != LockMix::exclusive) {
      out += "  note: the baseline (etcd v3lock) has no shared mode; it took exclusive locks\n";
    }
    if (w.contended) out += "  note: baseline waiters block in etcd's Lock RPC\n";
  } else if (url.rfind("warden://", 0) == 0 || url.rfind("wardens://", 0) == 0) {
    out +=
        "  note: the baseline is warden:// itself at another URL (same engine, same "
        "workload)\n";
  } else if (url.rfind("zk://", 0) == 0) {
    out += "  note: the baseline (ZooKeeper create+delete) never waits: a create always succeeds\n";
  } else if (url.rfind("postgres", 0) == 0 || url.rfind("mysql://", 0) == 0) {
    if (w.mix != LockMix::exclusive) {
      out += "  note: the baseline took exclusive locks whatever --mode said\n";
    }
    if (url.rfind("mysql://", 0) == 0 && w.contended) {
      out += "  note: baseline waiters ask GET_LOCK again every 0.2 s (and queue again)\n";
    }
  } else {
    if (w.mix != LockMix::exclusive) {
      out += "  note: the baseline (SET NX) has no shared mode; it took exclusive locks\n";
    }
    if (w.contended) out += "  note: baseline waiters poll: SET NX retried after 0.1..1 ms\n";
  }
  return out;
}

}  // namespace

std::string format_text(const BenchReport& r) {
  const Workload& w = r.workload;
  std::string out = fmt::format(
      "warden bench: {} client{}, {}, mode {}, {:g} s{}, ttl {} ms, releases {}\n\n",
      w.clients, w.clients == 1 ? "" : "s", keys_text(w), mode_text(w), r.duration_seconds,
      r.rounds > 1 && r.baseline ? fmt::format(" in {} alternating rounds", r.rounds) : "",
      w.ttl.count(),
      w.cache ? "cached" : (w.confirm_releases ? "confirmed" : "sent without waiting"));
  std::string warden_label = r.warden.url;
  std::string baseline_label = r.baseline ? r.baseline->url + " (baseline)" : "";
  const std::size_t width = std::max({warden_label.size(), baseline_label.size(), size_t{6}});
  out += fmt::format("  {:<{}}  {:>10}  {:>11}  {:>9}  {:>9}  {:>9}\n", "", width, "cycles",
                     "cycles/s", "p50 us", "p99 us", "p99.9 us");
  auto row = [&](const std::string& label, const PhaseFigures& p) {
    out += fmt::format("  {:<{}}  {:>10}  {:>11.0f}  {:>9.1f}  {:>9.1f}  {:>9.1f}\n", label, width,
                       p.cycles, p.cycles_per_second, to_us(p.acquire.p50_ns),
                       to_us(p.acquire.p99_ns), to_us(p.acquire.p999_ns));
  };
  row(warden_label, r.warden);
  if (r.baseline) row(baseline_label, *r.baseline);
  out += "  (latencies: acquire, from request to grant)\n";
  if (const auto ratio = r.ratio()) {
    out += fmt::format("\n  warden/baseline cycles/s: {:.2f}\n", *ratio);
    out += baseline_notes(r.baseline->url, w);
  }
  if (r.handoff) {
    out += fmt::format(
        "\n  hand-off to {} ({} samples): p50 {:.1f} us, p99 {:.1f} us, max {:.1f} us\n",
        w.cache ? "a client asking for a cached lock" : "a queued waiter", r.handoff->count, to_us(r.handoff->p50_ns), to_us(r.handoff->p99_ns),
        to_us(r.handoff->max_ns));
  }
  return out;
}

std::string format_json(const BenchReport& r) {
  const Workload& w = r.workload;
  json j{{"clients", w.clients},
         {"keys", w.keys},
         {"mode", w.permits > 0 ? std::string("semaphore") : std::string(to_string(w.mix))},
         {"permits", w.permits},
         {"members", w.members},
         {"contended", w.contended},
         {"releases_confirmed", w.confirm_releases},
         {"cache", w.cache},
         {"duration_s", r.duration_seconds},
         {"rounds", r.rounds},
         {"ttl_ms", w.ttl.count()},
         {"warden", phase_json(r.warden)},
         {"baseline", nullptr},
         {"ratio_cycles_per_s", nullptr},
         {"handoff_us", nullptr}};
  if (r.baseline) {
    j["baseline"] = phase_json(*r.baseline);
    const std::string& url = r.baseline->url;
    if (url.rfind("warden://", 0) == 0 || url.rfind("wardens://", 0) == 0) {
      j["baseline"]["lock"] = "warden:// engine";
      j["baseline"]["mode"] = to_string(w.mix);
    } else if (url.rfind("etcd://", 0) == 0) {
      j["baseline"]["lock"] = "etcd v3lock Lock + Unlock";
      j["baseline"]["mode"] = "exclusive";
    } else if (url.rfind("zk://", 0) == 0) {
      j["baseline"]["lock"] = "ZooKeeper create + delete";
      j["baseline"]["mode"] = "exclusive";
    } else if (url.rfind("postgres", 0) == 0) {
      j["baseline"]["lock"] = "pg_advisory_lock + pg_advisory_unlock";
      j["baseline"]["mode"] = "exclusive";
    } else if (url.rfind("mysql://", 0) == 0) {
      j["baseline"]["lock"] = "GET_LOCK + RELEASE_LOCK";
      j["baseline"]["mode"] = "exclusive";
    } else {
      j["baseline"]["lock"] = "SET NX PX + compare-and-delete EVALSHA";
      j["baseline"]["mode"] = "exclusive";
      j["baseline"]["retry_sleep_us"] = json::array({100, 1000});
    }
  }
  if (const auto ratio = r.ratio()) j["ratio_cycles_per_s"] = *ratio;
  if (r.handoff) j["handoff_us"] = latency_json(*r.handoff);
  return j.dump() + "\n";
}

std::string format_text(const std::string& url, const HoldLocksResult& r) {
  const double key_bytes = static_cast<double>(r.key_bytes);
  std::string out = fmt::format("warden bench: {} held locks on {}\n\n", r.locks, url);
  out += fmt::format("  acquired in {:.2f} s ({:.0f} locks/s, pipelined)\n", r.acquire_seconds,
                     per_second(static_cast<double>(r.locks), r.acquire_seconds));
  out += fmt::format("  server RSS: {} before, {} with all held ({} holders), {} after release\n",
                     mib(r.rss_before), mib(r.rss_held), r.holders_held, mib(r.rss_released));
  out += fmt::format("  bytes per held lock: {:.1f} ({:.1f} beyond the {} key bytes)\n",
                     r.bytes_per_lock, r.bytes_per_lock - key_bytes, r.key_bytes);
  out += fmt::format("  released in {:.2f} s ({:.0f} releases/s, pipelined)\n", r.release_seconds,
                     per_second(static_cast<double>(r.locks), r.release_seconds));
  return out;
}

std::string format_json(const std::string& url, const HoldLocksResult& r) {
  json j{{"check", "hold_locks"},
         {"url", url},
         {"locks", r.locks},
         {"key_bytes", r.key_bytes},
         {"rss_before_bytes", r.rss_before},
         {"rss_held_bytes", r.rss_held},
         {"rss_released_bytes", r.rss_released},
         {"holders_held", r.holders_held},
         {"bytes_per_lock", r.bytes_per_lock},
         {"bytes_per_lock_minus_key", r.bytes_per_lock - static_cast<double>(r.key_bytes)},
         {"acquire_s", r.acquire_seconds},
         {"acquire_per_s", per_second(static_cast<double>(r.locks), r.acquire_seconds)},
         {"release_s", r.release_seconds},
         {"release_per_s", per_second(static_cast<double>(r.locks), r.release_seconds)}};
  return j.dump() + "\n";
}

std::string format_text(const std::string& url, const IdleConnectionsResult& r) {
  std::string out = fmt::format("warden bench: {} idle connections to {}\n\n", r.requested, url);
  out += fmt::format("  opened {} in {:.2f} s\n", r.opened, r.connect_seconds);
  if (r.server_connections > 0) {
    out += fmt::format("  wardend INFO connections: {}; server RSS {} with one, {} with all",
                       r.server_connections, mib(r.rss_before), mib(r.rss_connected));
    if (r.opened > 1 && r.rss_connected >= r.rss_before) {
      out += fmt::format(
          " ({:.0f} bytes per connection)",
          static_cast<double>(r.rss_connected - r.rss_before) / static_cast<double>(r.opened - 1));
    }
    out += "\n";
  }
  if (r.ok()) {
    out += fmt::format("  OK: every connection answered PING, held {} ms, answered PING again\n",
                       r.held.count());
  } else {
    out += "  FAILED: " + *r.failure + "\n";
  }
  return out;
}

std::string format_json(const std::string& url, const IdleConnectionsResult& r) {
  json j{{"check", "idle_connections"},
         {"url", url},
         {"requested", r.requested},
         {"opened", r.opened},
         {"server_connections", r.server_connections},
         {"rss_before_bytes", r.rss_before},
         {"rss_connected_bytes", r.rss_connected},
         {"connect_s", r.connect_seconds},
         {"held_ms", r.held.count()},
         {"ok", r.ok()},
         {"failure", r.failure ? json(*r.failure) : json(nullptr)}};
  return j.dump() + "\n";
}

std::string format_text(const std::string& url, ElectionFailoverResult& r) {
  const LatencySummary s = summarize(r.failover_ns);
  const double ttl_ms = static_cast<double>(r.ttl.count());
  const auto ms = [](std::int64_t ns) { return static_cast<double>(ns) / 1e6; };
  std::string out = fmt::format(
      "warden bench: election failover on {}, {} samples, leases of {} ms\n\n", url, s.count,
      r.ttl.count());
  out += "  leader process killed -9 -> the waiting candidate leads\n";
  out += fmt::format("  p50 {:.1f} ms ({:.2f}x the TTL), min {:.1f} ms, max {:.1f} ms ({:.2f}x)\n",
                     ms(s.p50_ns), ms(s.p50_ns) / ttl_ms, ms(s.min_ns), ms(s.max_ns),
                     ms(s.max_ns) / ttl_ms);
  const LatencySummary o = summarize(r.observed_ns);
  out += "  leader process killed -9 -> an observer reports the new leader\n";
  out += fmt::format("  p50 {:.1f} ms ({:.2f}x the TTL), min {:.1f} ms, max {:.1f} ms ({:.2f}x)\n",
                     ms(o.p50_ns), ms(o.p50_ns) / ttl_ms, ms(o.min_ns), ms(o.max_ns),
                     ms(o.max_ns) / ttl_ms);
  out +=
      "  (the watchdog renews every TTL/3, so a lease runs out 2/3 to 1 TTL after the kill;\n"
      "   what the engine adds to notice it and hand the election on is the rest)\n";
  return out;
}

std::string format_json(const std::string& url, ElectionFailoverResult& r) {
  const LatencySummary s = summarize(r.failover_ns);
  json j{{"check", "election_failover"},
         {"url", url},
         {"ttl_ms", r.ttl.count()},
         {"samples", s.count},
         {"failover_min_ns", s.min_ns},
         {"failover_p50_ns", s.p50_ns},
         {"failover_max_ns", s.max_ns},
         {"observed_p50_ns", summarize(r.observed_ns).p50_ns},
         {"observed_max_ns", summarize(r.observed_ns).max_ns},
         {"p50_over_ttl", static_cast<double>(s.p50_ns) / 1e6 / static_cast<double>(r.ttl.count())},
         {"max_over_ttl", static_cast<double>(s.max_ns) / 1e6 / static_cast<double>(r.ttl.count())}};
  return j.dump() + "\n";
}

std::string format_text(const std::string& url, const AsyncWaitersResult& r) {
  const auto n = static_cast<double>(r.waiters);
  const auto per_wait = [&](long long bytes) { return static_cast<double>(bytes) / n; };
  std::string out =
      fmt::format("warden bench: {} asynchronous waits from one Client on {}\n\n", r.waiters, url);
  out += fmt::format(
      "  {} held locks, one wait each: {} granted after the holder released, in {:.3f} s\n",
      r.waiters, r.granted, r.grant_seconds);
  if (r.listed) {
    out += fmt::format("  all shown queued {:.3f} s after the first was asked\n", r.queue_seconds);
  } else {
    out += "  (the engine lists no waiters: threads and memory read without waiting for the "
           "queue)\n";
  }
  out += fmt::format("  threads in this process: {} before, {} while they waited ({:+d})\n",
                     r.threads_before, r.threads_waiting, r.threads_waiting - r.threads_before);
  out += fmt::format("  resident memory: {:+.0f} bytes per waiting acquire (this process)\n",
                     per_wait(r.rss_waiting_bytes - r.rss_before_bytes));
  out += fmt::format(
      "  heap in use: {:+.0f} bytes per waiting acquire (malloc's, without what freed "
      "allocations leave resident)\n",
      per_wait(r.heap_waiting_bytes - r.heap_before_bytes));
  out += fmt::format(
      "  heap in use once settled: {:+.0f} bytes per waiting acquire ({} {:.1f} s "
      "later: the calls that queued them answered)\n",
      per_wait(r.heap_settled_bytes - r.heap_before_bytes),
      r.heap_settled ? "steady" : "NOT steady", r.settle_seconds);
  const char* order = !r.fifo_asked      ? "no FIFO fairness on this engine"
                      : r.one_lock_fifo ? "in the order asked (FIFO)"
                                        : "NOT in the order asked";
  out += fmt::format("  {} waits on one lock: {} granted in {:.3f} s, {}\n", r.waiters,
                     r.one_lock_granted, r.one_lock_seconds, order);
  out += fmt::format(
      "  {} waits cancelled together: all told in {:.3f} s, {} not granted, {} left waiting "
      "{:.3f} s after the cancel\n",
      r.waiters, r.cancel_seconds, r.cancelled, r.left_waiting, r.left_seconds);
  if (r.failed > 0) out += fmt::format("  {} callbacks were told an error\n", r.failed);
  return out;
}

std::string format_json(const std::string& url, const AsyncWaitersResult& r) {
  json j{{"check", "async_waiters"},
         {"url", url},
         {"waiters", r.waiters},
         {"listed", r.listed},
         {"threads_before", r.threads_before},
         {"threads_waiting", r.threads_waiting},
         {"rss_per_wait_bytes", static_cast<double>(r.rss_waiting_bytes - r.rss_before_bytes) /
                                    static_cast<double>(r.waiters)},
         {"heap_per_wait_bytes", static_cast<double>(r.heap_waiting_bytes - r.heap_before_bytes) /
                                     static_cast<double>(r.waiters)},
         {"heap_settled_per_wait_bytes",
          static_cast<double>(r.heap_settled_bytes - r.heap_before_bytes) /
              static_cast<double>(r.waiters)},
         {"heap_settled", r.heap_settled},
         {"queue_seconds", r.queue_seconds},
         {"granted", r.granted},
         {"grant_seconds", r.grant_seconds},
         {"one_lock_granted", r.one_lock_granted},
         {"one_lock_seconds", r.one_lock_seconds},
         {"fifo_asked", r.fifo_asked},
         {"one_lock_fifo", r.one_lock_fifo},
         {"cancelled", r.cancelled},
         {"cancel_seconds", r.cancel_seconds},
         {"left_waiting", r.left_waiting},
         {"left_seconds", r.left_seconds},
         {"failed", r.failed}};
  return j.dump() + "\n";
}

std::string format_text(const std::string& url, const AsyncCyclesResult& r) {
  std::string out = fmt::format(
      "warden bench: acquire/release cycles on {}, {:.1f} s per side and count\n\n"
      "  {:>9}  {:>22}  {:>22}  {:>7}\n",
      url, r.seconds_each, "in flight", "async (one thread) /s", "blocking (threads) /s", "ratio");
  for (const auto& row : r.rows) {
    const double ratio =
        row.blocking_per_second > 0 ? row.async_per_second / row.blocking_per_second : 0;
    out += fmt::format("  {:>9}  {:>22.0f}  {:>22.0f}  {:>6.2f}x\n", row.in_flight,
                       row.async_per_second, row.blocking_per_second, ratio);
    if (row.async_failed + row.blocking_failed > 0) {
      out += fmt::format("  {:>9}  failed cycles: {} async, {} blocking\n", "", row.async_failed,
                         row.blocking_failed);
    }
  }
  return out;
}

std::string format_json(const std::string& url, const AsyncCyclesResult& r) {
  json rows = json::array();
  for (const auto& row : r.rows) {
    rows.push_back({{"in_flight", row.in_flight},
                    {"async_per_second", row.async_per_second},
                    {"blocking_per_second", row.blocking_per_second},
                    {"async_failed", row.async_failed},
                    {"blocking_failed", row.blocking_failed}});
  }
  json j{{"check", "async_cycles"}, {"url", url}, {"seconds_each", r.seconds_each}, {"rows", rows}};
  return j.dump() + "\n";
}

}  // namespace warden::bench

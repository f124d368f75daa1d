// Small helpers shared by the redis:// engine tests.
#pragma once

#include <algorithm>
#include <chrono>
#include <future>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "support/redis_server.h"
#include "support/waiting.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"
#include "warden/options.h"
#include "warden/types.h"

namespace warden::testing {

// The redis_lock_child helper (see lock_child.cc), built next to the tests.
// The code of the Error that Client::open(uri) throws, its message in *message;
// Errc::internal if it opened.
inline Errc open_error(const std::string& uri, std::string* message) {
  try {
    Client::open(uri);
  } catch (const Error& e) {
    *message = e.what();
    return e.code();
  }
  return Errc::internal;
}

// LockOptions with this TTL.
inline LockOptions ttl(std::chrono::milliseconds value) {
  LockOptions options;
  options.ttl = value;
  return options;
}

inline std::string lock_child_path() { return WARDEN_REDIS_LOCK_CHILD_PATH; }

// A bound for "it returned at all" — a call that would otherwise wait forever, or
// until a deadline far beyond this. Far above any sanitizer slowness on a loaded
// machine: it tells a hang from an answer, never a fast answer from a slow one.
inline constexpr Clock::duration kNoHang = 30s;

// ClientOptions whose waiters poll every `interval` exactly (constant, no jitter; the
// engine still caps it at a third of waiter_ttl_ms).
inline ClientOptions polling_every(std::chrono::milliseconds interval) {
  ClientOptions options;
  options.retry.kind = RetryPolicy::Kind::constant;
  options.retry.initial = interval;
  options.retry.max = interval;
  options.retry.jitter = 0;
  return options;
}

// `server`'s URI with query parameters appended ("waiter_ttl_ms=1000").
inline std::string uri_with(const RedisServer& server, const std::string& query) {
  return server.uri() + "?" + query;
}

// How many clients wait in the lock's queue (its waiters sorted set, ":w"): the
// engine's own record that a waiter is queued, read behind its back.
inline long long queued(RedisProbe& probe, std::string_view group, std::string_view name) {
  return std::stoll(probe.command({"ZCARD", lock_tag(group, name) + ":w"}));
}

// How many connections subscribe to the lock's (sharded) channel, where waiters hear
// that they may look again.
inline long long subscribers(RedisProbe& probe, std::string_view group, std::string_view name) {
  const std::string reply = probe.command({"PUBSUB", "SHARDNUMSUB", lock_tag(group, name) + ":c"});
  return std::stoll(reply.substr(reply.rfind('\n') + 1));  // "channel\ncount"
}

// Starts `client`'s acquire of ("g", name) on another thread and returns once the
// engine shows `queued_total` waiters on that lock (for at most 5 s: the caller asserts
// queued() itself, so a waiter that never queued fails there, by name).
inline std::future<Lease> acquire_queued(Client& client, RedisProbe& probe, const std::string& name,
                                         Mode mode, Wait wait, std::stop_token stop = {},
                                         long long queued_total = 1) {
  auto future = std::async(std::launch::async, [&client, name, mode, wait, stop] {
    return client.lock("g", name).acquire(mode, wait, stop);
  });
  eventually([&] { return queued(probe, "g", name) == queued_total; });
  return future;
}

// The same, for a lock opened with `options` (a non-fair lock, say).
inline std::future<Lease> acquire_queued(Client& client, RedisProbe& probe, const std::string& name,
                                         LockOptions options, Mode mode, Wait wait,
                                         long long queued_total = 1) {
  auto future = std::async(std::launch::async, [&client, name, options, mode, wait] {
    return client.lock("g", name, options).acquire(mode, wait);
  });
  eventually([&] { return queued(probe, "g", name) == queued_total; });
  return future;
}

// The lock's FIFO queue (":q"), head first: the entries "MODE:LIVE_MS:OWNER" of the
// waiters that have not been admitted yet.
inline std::vector<std::string> queue_of(RedisProbe& probe, std::string_view group,
                                         std::string_view name) {
  const std::string reply = probe.command({"LRANGE", lock_tag(group, name) + ":q", "0", "-1"});
  std::vector<std::string> entries;
  std::size_t start = 0;
  while (start < reply.size()) {
    const auto end = std::min(reply.find('\n', start), reply.size());
    entries.push_back(reply.substr(start, end - start));
    start = end + 1;
  }
  return entries;
}

// The warden keys left behind, for a failure message.
inline std::string describe(const std::vector<std::string>& keys) {
  std::string text;
  for (const auto& k : keys) text += "\n  " + k;
  return text.empty() ? " none" : text;
}

// true once the engine's keys are all gone from `db`; the idle lock's keys are
// deleted by the call that made it idle, so this should hold at once.
inline bool no_warden_keys(RedisProbe& probe, int db = 0, Clock::duration timeout = kPrompt) {
  return eventually([&] { return probe.warden_keys(db).empty(); }, timeout);
}

}  // namespace warden::testing

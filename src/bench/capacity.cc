#include "bench/capacity.h"

#include <hiredis/hiredis.h>
#include <sys/resource.h>

#include <algorithm>
#include <map>
#include <thread>
#include <vector>

#include "bench/resp_connection.h"
#include "bench/stats.h"
#include "core/uri.h"
#include "warden/error.h"

namespace warden::bench {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto kTimeout = 30s;                     // one pipelined batch, or one connect
constexpr std::string_view kHoldTtlMs = "600000";  // 10 minutes
constexpr std::string_view kMemGroup = "bench-mem/";
// Descriptors kept free for everything else the process opens.
constexpr std::uint64_t kSpareDescriptors = 64;

std::map<std::string, std::string> info(RespConnection& conn) {
  const std::string text = expect_text(*conn.command({"INFO"}), "INFO on " + conn.endpoint());
  std::map<std::string, std::string> fields;
  for (auto& [key, value] : parse_info(text)) fields[key] = std::move(value);
  return fields;
}

std::uint64_t info_number(const std::map<std::string, std::string>& fields, const std::string& name,
                          const std::string& endpoint) {
  const auto it = fields.find(name);
  if (it == fields.end()) {
    throw Error(Errc::internal,
                "INFO on " + endpoint + " has no " + name + " field" +
                    (name == "rss_bytes" ? " (a wardend without it is too old)" : ""));
  }
  try {
    return std::stoull(it->second);
  } catch (const std::exception&) {
    throw Error(Errc::internal, "INFO on " + endpoint + ": " + name + " is '" + it->second + "'");
  }
}

Endpoint wardend_endpoint(const std::string& url) {
  if (core::Uri::parse(url).scheme != "warden") {
    throw Error(Errc::invalid_argument, "capacity checks need a warden://HOST:PORT URL");
  }
  return endpoint_of(url);
}

std::string padded(std::uint64_t i, std::size_t width) {
  std::string digits = std::to_string(i);
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return digits;
}

// Soft descriptor limit up to the hard one; true if `needed` descriptors fit.
bool raise_descriptor_limit(std::uint64_t needed, std::uint64_t& limit) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return false;
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
    getrlimit(RLIMIT_NOFILE, &lim);
  }
  limit = lim.rlim_cur;
  return lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= needed;
}

// PINGs every connection: all requests go out first, then every reply is read.
std::optional<std::string> ping_all(std::vector<RespConnection>& conns, std::string_view round) {
  for (std::size_t i = 0; i < conns.size(); ++i) {
    try {
      conns[i].append({"PING"});
      conns[i].flush();
    } catch (const Error& e) {
      return std::string(round) + " PING on connection " + std::to_string(i + 1) + ": " + e.what();
    }
  }
  for (std::size_t i = 0; i < conns.size(); ++i) {
    try {
      ReplyPtr reply = conns[i].read();
      if (reply->type != REDIS_REPLY_STATUS || std::string_view(reply->str, reply->len) != "PONG") {
        return std::string(round) + " PING on connection " + std::to_string(i + 1) +
               ": expected PONG, got " + describe(*reply);
      }
    } catch (const Error& e) {
      return std::string(round) + " PING on connection " + std::to_string(i + 1) + ": " + e.what();
    }
  }
  return std::nullopt;
}

}  // namespace

HoldLocksResult hold_locks(const std::string& url, std::uint64_t locks, std::size_t name_bytes,
                           std::size_t batch) {
  const Endpoint endpoint = wardend_endpoint(url);
  RespConnection conn = RespConnection::open(endpoint, kTimeout);
  const std::string& where = conn.endpoint();

  HoldLocksResult r;
  r.locks = locks;
  r.key_bytes = kMemGroup.size() + std::max(name_bytes, std::to_string(locks).size());
  r.rss_before = info_number(info(conn), "rss_bytes", where);

  std::vector<std::uint64_t> tokens(locks, 0);  // 0: not held
  std::vector<std::string> secrets(locks);      // each grant's owner secret, for RELEASE
  // Releases what was acquired so far, pipelined; false if a reply said "not held".
  auto release_all = [&]() {
    bool all = true;
    for (std::uint64_t first = 0; first < locks; first += batch) {
      const std::uint64_t last = std::min<std::uint64_t>(locks, first + batch);
      std::uint64_t sent = 0;
      for (std::uint64_t i = first; i < last; ++i) {
        if (tokens[i] == 0) continue;
        const std::string key = std::string(kMemGroup) + padded(i + 1, name_bytes);
        const std::string token = std::to_string(tokens[i]);
        conn.append({"RELEASE", key, token, secrets[i]});
        ++sent;
      }
      for (std::uint64_t k = 0; k < sent; ++k) {
        if (expect_integer(*conn.read(), "RELEASE on " + where) != 1) all = false;
      }
      for (std::uint64_t i = first; i < last; ++i) {
        tokens[i] = 0;
        secrets[i].clear();
      }
    }
    return all;
  };

  const auto acquire_start = Clock::now();
  try {
    for (std::uint64_t first = 0; first < locks; first += batch) {
      const std::uint64_t last = std::min<std::uint64_t>(locks, first + batch);
      for (std::uint64_t i = first; i < last; ++i) {
        const std::string key = std::string(kMemGroup) + padded(i + 1, name_bytes);
        conn.append({"ACQUIRE", key, "exclusive", kHoldTtlMs});
      }
      std::optional<Error> refused;
      for (std::uint64_t i = first; i < last; ++i) {
        ReplyPtr reply = conn.read();
        // [token, waited_us, secret] (docs/protocol.md)
        if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 3 &&
            reply->element[0]->type == REDIS_REPLY_INTEGER &&
            reply->element[2]->type == REDIS_REPLY_STRING) {
          tokens[i] = static_cast<std::uint64_t>(reply->element[0]->integer);
          secrets[i].assign(reply->element[2]->str, reply->element[2]->len);
        } else if (!refused) {
          const std::string key = std::string(kMemGroup) + padded(i + 1, name_bytes);
          if (reply->type == REDIS_REPLY_NIL) {
            refused = Error(Errc::resource_exhausted,
                            key +
                                " is held already (by an earlier run? its locks expire "
                                "within 10 minutes)");
          } else {
            try {
              reject_reply(*reply, "ACQUIRE " + key + " on " + where);
            } catch (const Error& e) {
              refused = e;
            }
          }
        }
      }
      if (refused) throw *refused;
    }
  } catch (const Error&) {
    try {
      release_all();
    } catch (const Error&) {
      // The first error is the one to report; the locks expire within 10 minutes.
    }
    throw;
  }
  r.acquire_seconds = seconds_since(acquire_start);

  const auto held = info(conn);
  r.rss_held = info_number(held, "rss_bytes", where);
  r.holders_held = info_number(held, "holders", where);
  r.bytes_per_lock = locks == 0
                         ? 0
                         : (static_cast<double>(r.rss_held) - static_cast<double>(r.rss_before)) /
                               static_cast<double>(locks);

  const auto release_start = Clock::now();
  if (!release_all()) {
    throw Error(Errc::internal, "RELEASE on " + where + " said a held bench lock was not held");
  }
  r.release_seconds = seconds_since(release_start);
  r.rss_released = info_number(info(conn), "rss_bytes", where);
  return r;
}

IdleConnectionsResult idle_connections(const std::string& url, std::uint64_t connections,
                                       std::chrono::milliseconds hold) {
  const Endpoint endpoint = wardend_endpoint(url);
  IdleConnectionsResult r;
  r.requested = connections;
  r.held = hold;

  std::uint64_t limit = 0;
  if (!raise_descriptor_limit(connections + kSpareDescriptors, limit)) {
    throw Error(Errc::resource_exhausted, std::to_string(connections) + " connections need about " +
                                              std::to_string(connections + kSpareDescriptors) +
                                              " file descriptors; this process may open " +
                                              std::to_string(limit) +
                                              " (raise the hard limit: ulimit -Hn)");
  }

  std::vector<RespConnection> conns;
  conns.reserve(connections);
  // Connection 1 also asks INFO, so the check counts exactly the connections opened.
  conns.push_back(RespConnection::open(endpoint, kTimeout));
  r.rss_before = info_number(info(conns[0]), "rss_bytes", conns[0].endpoint());

  const auto connect_start = Clock::now();
  while (conns.size() < connections) {
    try {
      conns.push_back(RespConnection::open(endpoint, kTimeout));
    } catch (const Error& e) {
      r.failure = "connect #" + std::to_string(conns.size() + 1) + ": " + e.what();
      break;
    }
  }
  r.connect_seconds = seconds_since(connect_start);
  r.opened = conns.size();
  if (r.failure) return r;

  if ((r.failure = ping_all(conns, "first"))) return r;
  try {
    const auto fields = info(conns[0]);
    r.server_connections = info_number(fields, "connections", conns[0].endpoint());
    r.rss_connected = info_number(fields, "rss_bytes", conns[0].endpoint());
  } catch (const Error& e) {
    r.failure = std::string("INFO: ") + e.what();
    return r;
  }
  if (r.server_connections < connections) {
    r.failure = "wardend's INFO reports " + std::to_string(r.server_connections) +
                " connections, expected at least " + std::to_string(connections);
    return r;
  }
  std::this_thread::sleep_for(hold);
  r.failure = ping_all(conns, "second");
  return r;
}

}  // namespace warden::bench

#include "bench/redis_baseline.h"

#include <hiredis/hiredis.h>

#include <charconv>
#include <map>
#include <random>
#include <thread>

#include "bench/resp_connection.h"
#include "core/uri.h"
#include "engines/resp_client/cluster_slots.h"
#include "engines/resp_client/hiredis_reply.h"
#include "warden/error.h"

namespace warden::bench {
namespace {

using Clock = std::chrono::steady_clock;

const std::string kRedisKeyPrefix = "warden-bench:";

// One key of a client, and the connection (to its slot's master, on a cluster) it
// goes through.
struct RoutedKey {
  std::string key;
  std::size_t conn = 0;
};

class RedisCycleClient final : public CycleClient {
 public:
  RedisCycleClient(std::vector<RespConnection> conns, std::string sha, std::vector<RoutedKey> keys,
                   const Workload& workload, int index)
      : conns_(std::move(conns)),
        sha_(std::move(sha)),
        keys_(std::move(keys)),
        ttl_(std::to_string(workload.ttl.count())),
        value_prefix_(workload.run_id + ":" + std::to_string(index) + ":"),
        next_(static_cast<std::size_t>(index) % keys_.size()),
        rng_(static_cast<std::uint32_t>(index) + 1) {}

  std::optional<std::chrono::nanoseconds> cycle(const std::stop_token& stop) override {
    const std::string& key = keys_[next_].key;
    RespConnection& conn_ = conns_[keys_[next_].conn];
    if (++next_ == keys_.size()) next_ = 0;
    const std::string_view value = next_value();
    const auto t0 = Clock::now();
    while (true) {
      ReplyPtr set = conn_.command({"SET", key, value, "NX", "PX", ttl_});
      if (set->type == REDIS_REPLY_STATUS) break;  // +OK: ours
      if (set->type != REDIS_REPLY_NIL) reject_reply(*set, "SET on " + conn_.endpoint());
      // Held by another client: no queue to join, so poll after a short random sleep.
      if (stop.stop_requested()) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::microseconds(retry_us_(rng_)));
      if (stop.stop_requested()) return std::nullopt;
    }
    const auto t1 = Clock::now();
    ReplyPtr del = conn_.command({"EVALSHA", sha_, "1", key, value});
    if (expect_integer(*del, "EVALSHA on " + conn_.endpoint()) != 1) {
      throw Error(Errc::lost, "baseline lock " + key + " was gone at release (TTL too short?)");
    }
    return t1 - t0;
  }

 private:
  // "<run>:<client>:<n>": unique per acquire, so a release can only delete its own SET.
  std::string_view next_value() {
    value_.assign(value_prefix_);
    char digits[24];
    const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, ++counter_);
    value_.append(digits, end);
    return value_;
  }

  std::vector<RespConnection> conns_;
  std::string sha_;  // the same on every server: a script's SHA1 is of its text
  std::vector<RoutedKey> keys_;
  std::string ttl_;
  std::string value_prefix_;
  std::string value_;
  std::uint64_t counter_ = 0;
  std::size_t next_;
  std::minstd_rand rng_;
  std::uniform_int_distribution<int> retry_us_{100, 1000};
};

}  // namespace

const char* const kCompareAndDelete =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
    "else return 0 end";

namespace {

namespace rc = engines::resp_client;

// Where a key lives: the one server, or on a cluster the master of its slot.
class KeyRouter {
 public:
  KeyRouter(const std::string& url, std::chrono::milliseconds timeout) {
    const core::Uri uri = core::Uri::parse(url);
    if (uri.scheme != "redis+cluster") {
      one_ = endpoint_of(url);
      return;
    }
    // The first node, with the URL's credentials; the map is read once (the cluster
    // is not resharded during a run).
    Endpoint first;
    first.host = uri.hosts.at(0).host;
    first.port = uri.hosts.at(0).port.value_or(6379);  // Redis's default port
    if (uri.user && !uri.user->empty()) first.user = uri.user;
    if (uri.password && !uri.password->empty()) first.password = uri.password;
    one_ = first;
    RespConnection conn = RespConnection::open(*one_, timeout);
    const ReplyPtr reply = conn.command({"CLUSTER", "SLOTS"});
    map_.emplace(rc::parse_cluster_slots(rc::from_hiredis(*reply), one_->host));
  }

  Endpoint endpoint_for(const std::string& key) const {
    if (!map_) return *one_;
    const auto node = map_->endpoint_for(rc::key_slot(key));
    if (!node) throw Error(Errc::unavailable, "no master serves the slot of " + key);
    Endpoint e = *one_;
    e.host = node->host;
    e.port = node->port;
    return e;
  }

 private:
  std::optional<Endpoint> one_;
  std::optional<rc::SlotMap> map_;
};

}  // namespace

std::vector<std::unique_ptr<CycleClient>> open_redis_clients(const std::string& url,
                                                             const Workload& workload,
                                                             std::chrono::milliseconds timeout) {
  const std::string scheme = core::Uri::parse(url).scheme;
  if (scheme != "redis" && scheme != "redis+cluster") {
    throw Error(Errc::invalid_argument,
                "--baseline needs a redis://HOST:PORT or redis+cluster://H1:P1,... URL");
  }
  const KeyRouter router(url, timeout);
  std::vector<std::unique_ptr<CycleClient>> clients;
  clients.reserve(static_cast<std::size_t>(workload.clients));
  for (int i = 0; i < workload.clients; ++i) {
    // Each client: one connection per server its keys live on, the script on each.
    std::vector<RespConnection> conns;
    std::map<std::string, std::size_t> conn_of;  // by "host:port"
    std::string sha;
    std::vector<RoutedKey> keys;
    keys.reserve(static_cast<std::size_t>(workload.keys));
    for (int k = 0; k < workload.keys; ++k) {
      std::string key = kRedisKeyPrefix + lock_name(workload, i, k);
      const Endpoint endpoint = router.endpoint_for(key);
      auto [it, added] = conn_of.emplace(endpoint.name(), conns.size());
      if (added) {
        conns.push_back(RespConnection::open(endpoint, timeout));
        sha = expect_text(*conns.back().command({"SCRIPT", "LOAD", kCompareAndDelete}),
                          "SCRIPT LOAD on " + conns.back().endpoint());
      }
      keys.push_back(RoutedKey{std::move(key), it->second});
    }
    clients.push_back(std::make_unique<RedisCycleClient>(std::move(conns), std::move(sha),
                                                         std::move(keys), workload, i));
  }
  return clients;
}

}  // namespace warden::bench

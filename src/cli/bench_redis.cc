#include "cli/bench_redis.h"

#include <hiredis/hiredis.h>

#include <charconv>
#include <random>
#include <thread>

#include "cli/bench_resp.h"
#include "core/uri.h"
#include "warden/error.h"

namespace warden::cli::bench {
namespace {

using Clock = std::chrono::steady_clock;

const std::string kKeyPrefix = "warden-bench:";

class RedisCycleClient final : public CycleClient {
 public:
  RedisCycleClient(RespConnection conn, std::string sha, std::vector<std::string> keys,
                   const Workload& workload, int index)
      : conn_(std::move(conn)),
        sha_(std::move(sha)),
        keys_(std::move(keys)),
        ttl_(std::to_string(workload.ttl.count())),
        value_prefix_(workload.run_id + ":" + std::to_string(index) + ":"),
        next_(static_cast<std::size_t>(index) % keys_.size()),
        rng_(static_cast<std::uint32_t>(index) + 1) {}

  std::optional<std::chrono::nanoseconds> cycle(const std::stop_token& stop) override {
    const std::string& key = keys_[next_];
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

  RespConnection conn_;
  std::string sha_;
  std::vector<std::string> keys_;
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

std::vector<std::unique_ptr<CycleClient>> open_redis_clients(const std::string& url,
                                                             const Workload& workload,
                                                             std::chrono::milliseconds timeout) {
  const Endpoint endpoint = endpoint_of(url);
  if (core::Uri::parse(url).scheme != "redis") {
    throw Error(Errc::invalid_argument, "--baseline needs a redis://HOST:PORT URL");
  }
  std::vector<std::unique_ptr<CycleClient>> clients;
  clients.reserve(static_cast<std::size_t>(workload.clients));
  for (int i = 0; i < workload.clients; ++i) {
    RespConnection conn = RespConnection::open(endpoint, timeout);
    std::string sha = expect_text(*conn.command({"SCRIPT", "LOAD", kCompareAndDelete}),
                                  "SCRIPT LOAD on " + conn.endpoint());
    std::vector<std::string> keys;
    keys.reserve(static_cast<std::size_t>(workload.keys));
    for (int k = 0; k < workload.keys; ++k) keys.push_back(kKeyPrefix + lock_name(workload, i, k));
    clients.push_back(std::make_unique<RedisCycleClient>(std::move(conn), std::move(sha),
                                                         std::move(keys), workload, i));
  }
  return clients;
}

}  // namespace warden::cli::bench

#include "bench/postgres_baseline.h"

#include "core/uri.h"
#include "engines/postgres/pg_config.h"
#include "engines/postgres/pg_connection.h"
#include "warden/error.h"

namespace warden::bench {
namespace {

using engines::postgres::Param;
using engines::postgres::PgConnection;
using engines::postgres::QueryLimits;

// The first int4 of every baseline key ("wb" in ASCII): the second numbers the locks.
constexpr const char* kBenchClass = "30562";

class PostgresCycleClient final : public CycleClient {
 public:
  PostgresCycleClient(std::unique_ptr<PgConnection> conn, std::vector<std::string> keys)
      : conn_(std::move(conn)), keys_(std::move(keys)) {}

  std::optional<std::chrono::nanoseconds> cycle(const std::stop_token& stop) override {
    const std::string& key = keys_[next_];
    if (++next_ == keys_.size()) next_ = 0;
    QueryLimits limits;
    limits.stop = stop;
    const auto t0 = std::chrono::steady_clock::now();
    const auto locked =
        conn_->query("SELECT pg_advisory_lock(" + std::string(kBenchClass) + ", $1::integer)",
                     {Param::text(key)}, limits);
    if (!locked.ok()) {
      if (stop.stop_requested()) return std::nullopt;
      engines::postgres::throw_reply(locked, "pg_advisory_lock");
    }
    const auto t1 = std::chrono::steady_clock::now();
    const auto unlocked =
        conn_->query("SELECT pg_advisory_unlock(" + std::string(kBenchClass) + ", $1::integer)",
                     {Param::text(key)}, QueryLimits{});
    if (!unlocked.ok()) engines::postgres::throw_reply(unlocked, "pg_advisory_unlock");
    return t1 - t0;
  }

 private:
  std::unique_ptr<PgConnection> conn_;
  std::vector<std::string> keys_;
  std::size_t next_ = 0;
};

}  // namespace

std::vector<std::unique_ptr<CycleClient>> open_postgres_clients(const std::string& url,
                                                                const Workload& workload) {
  const auto config = engines::postgres::parse_config(core::Uri::parse(url), ClientOptions{});
  std::vector<std::unique_ptr<CycleClient>> clients;
  for (int i = 0; i < workload.clients; ++i) {
    std::vector<std::string> keys;
    for (int k = 0; k < workload.keys; ++k) keys.push_back(std::to_string(i * workload.keys + k));
    clients.push_back(
        std::make_unique<PostgresCycleClient>(PgConnection::open(config), std::move(keys)));
  }
  return clients;
}

}  // namespace warden::bench

#include "bench/mysql_baseline.h"

#include <mysql.h>

#include <chrono>
#include <mutex>
#include <string_view>

#include "core/uri.h"
#include "engines/mysql/connection.h"
#include "engines/mysql/mysql_config.h"
#include "warden/error.h"

namespace warden::bench {
namespace {

// The longest a baseline statement may take to answer (GET_LOCK asks for 0.2 s).
constexpr unsigned int kTimeoutSeconds = 5;

class MysqlCycleClient final : public CycleClient {
 public:
  MysqlCycleClient(MYSQL* mysql, const std::vector<std::string>& names) : mysql_(mysql) {
    for (const std::string& name : names) {
      const std::string literal = engines::mysql::hex_literal(name);
      acquire_.push_back("SELECT GET_LOCK(" + literal + ", 0.2)");
      release_.push_back("SELECT RELEASE_LOCK(" + literal + ")");
    }
  }
  ~MysqlCycleClient() override { mysql_close(mysql_); }
  MysqlCycleClient(const MysqlCycleClient&) = delete;
  MysqlCycleClient& operator=(const MysqlCycleClient&) = delete;

  std::optional<std::chrono::nanoseconds> cycle(const std::stop_token& stop) override {
    const std::size_t i = next_;
    if (++next_ == acquire_.size()) next_ = 0;
    const auto t0 = std::chrono::steady_clock::now();
    // 0: the 0.2 s ran out with the lock held by another client; ask again.
    while (scalar(acquire_[i], "GET_LOCK") != "1") {
      if (stop.stop_requested()) return std::nullopt;
    }
    const auto t1 = std::chrono::steady_clock::now();
    if (scalar(release_[i], "RELEASE_LOCK") != "1") {
      throw Error(Errc::internal, "mysql baseline: RELEASE_LOCK did not release a lock it held");
    }
    return t1 - t0;
  }

 private:
  // One statement, one round trip; the first column of its one row ("" for NULL).
  std::string scalar(const std::string& sql, std::string_view what) {
    if (mysql_real_query(mysql_, sql.data(), sql.size()) != 0) fail(what);
    MYSQL_RES* result = mysql_store_result(mysql_);
    if (result == nullptr) fail(what);
    MYSQL_ROW row = mysql_fetch_row(result);
    std::string value = row != nullptr && row[0] != nullptr ? row[0] : "";
    mysql_free_result(result);
    return value;
  }

  [[noreturn]] void fail(std::string_view what) {
    engines::mysql::throw_mysql_error(mysql_errno(mysql_), mysql_error(mysql_),
                                      std::string("mysql baseline ") + std::string(what));
  }

  MYSQL* mysql_;
  std::vector<std::string> acquire_;
  std::vector<std::string> release_;
  std::size_t next_ = 0;
};

MYSQL* connect(const engines::mysql::MysqlConfig& config) {
  static std::once_flag once;
  std::call_once(once, [] { mysql_library_init(0, nullptr, nullptr); });
  MYSQL* mysql = mysql_init(nullptr);
  if (mysql == nullptr) throw Error(Errc::resource_exhausted, "mysql baseline: out of memory");
  const unsigned int timeout = kTimeoutSeconds;
  mysql_options(mysql, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
  mysql_options(mysql, MYSQL_OPT_READ_TIMEOUT, &timeout);
  mysql_options(mysql, MYSQL_OPT_WRITE_TIMEOUT, &timeout);
  if (mysql_real_connect(mysql, config.host.c_str(), config.user.c_str(), config.password.c_str(),
                         config.database.c_str(), config.port, nullptr, 0) == nullptr) {
    const unsigned int code = mysql_errno(mysql);
    const std::string message = mysql_error(mysql);
    mysql_close(mysql);
    engines::mysql::throw_mysql_error(
        code, message,
        "mysql baseline: connect to " + config.host + ':' + std::to_string(config.port));
  }
  return mysql;
}

}  // namespace

std::vector<std::unique_ptr<CycleClient>> open_mysql_clients(const std::string& url,
                                                             const Workload& workload) {
  const auto config = engines::mysql::parse_config(core::Uri::parse(url), ClientOptions{});
  std::vector<std::unique_ptr<CycleClient>> clients;
  clients.reserve(static_cast<std::size_t>(workload.clients));
  for (int i = 0; i < workload.clients; ++i) {
    std::vector<std::string> names;
    names.reserve(static_cast<std::size_t>(workload.keys));
    for (int k = 0; k < workload.keys; ++k) {
      names.push_back(kMysqlBenchPrefix + lock_name(workload, i, k));
    }
    clients.push_back(std::make_unique<MysqlCycleClient>(connect(config), names));
  }
  return clients;
}

}  // namespace warden::bench

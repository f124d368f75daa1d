#include "support/mariadb_server.h"

#include <mysql.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace warden::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr auto kStartLimit = 60s;

std::string tail(const std::string& text, std::size_t bytes = 2000) {
  return text.size() <= bytes ? text : text.substr(text.size() - bytes);
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// mariadb-install-db takes about a second: run once per process, copied per server. It
// failed once, unexplained, on a machine loaded far beyond its cores; so it gets three
// tries on a fresh directory, and the error carries its log (the temp dir that held it
// is gone by the time anyone reads the message).
const fs::path& template_data_dir() {
  static TempDir dir("warden-mariadb-template");
  static std::once_flag once;
  static fs::path data;
  std::call_once(once, [] {
    const fs::path log = dir.path() / "install.log";
    for (int attempt = 1;; ++attempt) {
      data = dir.path() / ("data" + std::to_string(attempt));
      const std::string command = "mariadb-install-db --no-defaults --user=root --datadir='" +
                                  data.string() +
                                  "' --auth-root-authentication-method=normal --skip-test-db "
                                  ">'" +
                                  log.string() + "' 2>&1";
      if (std::system(command.c_str()) == 0) return;
      if (attempt == 3) {
        throw std::runtime_error("mariadb-install-db failed three times; the last log:\n" +
                                 tail(read_text(log)));
      }
    }
  });
  return data;
}

}  // namespace

std::string sql_hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "X'";
  for (const char c : bytes) {
    const auto u = static_cast<unsigned char>(c);
    out += kHex[u >> 4];
    out += kHex[u & 0xF];
  }
  return out + "'";
}

MariaDbServer::MariaDbServer() : dir_("warden-mariadb") {
  fs::copy(template_data_dir(), dir_.path() / "data", fs::copy_options::recursive);
  start();
}

MariaDbServer::~MariaDbServer() { process_.kill9(); }

std::string MariaDbServer::uri() const { return uri_as("warden", "secret"); }

std::string MariaDbServer::uri_as(std::string_view user, std::string_view password,
                                  std::string_view database) const {
  return "mysql://" + std::string(user) + ":" + std::string(password) +
         "@127.0.0.1:" + std::to_string(port_) + "/" + std::string(database);
}

void MariaDbServer::start() {
  const bool first = port_ == 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (first) port_ = free_port();
    process_ = ServerProcess(
        {"mariadbd", "--no-defaults", "--user=root", "--datadir=" + (dir_.path() / "data").string(),
         "--port=" + std::to_string(port_), "--bind-address=127.0.0.1",
         "--socket=" + (dir_.path() / "sock").string(),
         // Its own temp dir: a mariadbd deletes the #sql temp files it finds in its tmpdir
         // when it starts, so two servers sharing /tmp lose each other's temp tables.
         "--tmpdir=" + dir_.path().string(),
         "--pid-file=" + (dir_.path() / "mariadbd.pid").string(), "--skip-name-resolve",
         "--innodb-buffer-pool-size=16M", "--innodb-log-file-size=8M", "--max-connections=1000",
         "--skip-log-bin", "--performance-schema=OFF"},
        dir_.path() / "mariadbd.log");
    process_.start();
    const auto started = std::chrono::steady_clock::now();
    if (wait_for_port(port_, std::chrono::duration_cast<std::chrono::milliseconds>(kStartLimit)) &&
        process_.running()) {
      // A server that listens already may still drop a first connection while it starts
      // on a loaded machine ("reading initial communication packet"): asked again
      // while it runs, within the start limit.
      while (true) {
        try {
          query(
              "CREATE DATABASE IF NOT EXISTS warden; CREATE USER IF NOT EXISTS "
              "'warden'@'%' IDENTIFIED BY 'secret'; GRANT ALL ON warden.* TO 'warden'@'%'");
          return;
        } catch (const std::runtime_error&) {
          if (!process_.running() || std::chrono::steady_clock::now() - started > kStartLimit) {
            throw;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
      }
    }
    process_.kill9();
    if (!first) break;
  }
  throw std::runtime_error("mariadbd did not come up:\n" + tail(process_.log_text()));
}

void MariaDbServer::kill9() { process_.kill9(); }
void MariaDbServer::pause() { process_.signal(SIGSTOP); }
void MariaDbServer::resume() { process_.signal(SIGCONT); }
bool MariaDbServer::running() { return process_.running(); }

std::vector<MariaDbServer::Row> MariaDbServer::query(const std::string& sql) {
  return query_as("root", "", sql);
}

std::vector<MariaDbServer::Row> MariaDbServer::query_as(const std::string& user,
                                                        const std::string& password,
                                                        const std::string& sql) {
  MYSQL* mysql = mysql_init(nullptr);
  if (mysql == nullptr) throw std::runtime_error("mysql_init failed");
  const unsigned int timeout = 30;
  mysql_options(mysql, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
  mysql_options(mysql, MYSQL_OPT_READ_TIMEOUT, &timeout);
  std::vector<Row> rows;
  std::string error;
  if (mysql_real_connect(mysql, "127.0.0.1", user.c_str(), password.c_str(), nullptr, port_, nullptr,
                         CLIENT_MULTI_STATEMENTS) == nullptr ||
      mysql_real_query(mysql, sql.data(), sql.size()) != 0) {
    error = mysql_error(mysql);
  } else {
    while (true) {
      if (MYSQL_RES* result = mysql_store_result(mysql)) {
        rows.clear();
        const unsigned int fields = mysql_num_fields(result);
        while (MYSQL_ROW row = mysql_fetch_row(result)) {
          const unsigned long* lengths = mysql_fetch_lengths(result);
          Row out;
          for (unsigned int i = 0; i < fields; ++i) {
            out.push_back(row[i] == nullptr
                              ? std::nullopt
                              : std::optional<std::string>(std::string(row[i], lengths[i])));
          }
          rows.push_back(std::move(out));
        }
        mysql_free_result(result);
      } else if (mysql_field_count(mysql) != 0) {
        error = mysql_error(mysql);
        break;
      }
      const int more = mysql_next_result(mysql);
      if (more > 0) error = mysql_error(mysql);
      if (more != 0) break;
    }
  }
  mysql_close(mysql);
  if (!error.empty()) throw std::runtime_error("MariaDB probe: " + error + " in: " + sql);
  return rows;
}

std::optional<std::string> MariaDbServer::scalar(const std::string& sql) {
  const auto rows = query(sql);
  if (rows.empty() || rows[0].empty()) return std::nullopt;
  return rows[0][0];
}

std::optional<std::uint64_t> MariaDbServer::lock_id(std::string_view group, std::string_view name) {
  const auto tables = scalar(
      "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'warden' AND "
      "TABLE_NAME = 'warden_locks'");
  if (tables != "1") return std::nullopt;
  const auto id = scalar("SELECT id FROM warden.warden_locks WHERE grp = " + sql_hex(group) +
                         " AND name = " + sql_hex(name));
  if (!id) return std::nullopt;
  return std::stoull(*id);
}

std::optional<std::uint64_t> MariaDbServer::holder_session(std::string_view group,
                                                           std::string_view name) {
  const auto id = lock_id(group, name);
  if (!id) return std::nullopt;
  const auto session = scalar("SELECT IS_USED_LOCK('warden:warden:" + std::to_string(*id) + "')");
  if (!session) return std::nullopt;
  return std::stoull(*session);
}

std::size_t MariaDbServer::waiting_sessions(std::string_view group, std::string_view name) {
  const auto id = lock_id(group, name);
  if (!id) return 0;
  const std::string name_sql = "warden:warden:" + std::to_string(*id);
  const std::string lock = "''" + name_sql + "'',";
  // A warden_take session is queued once it holds the turnstile or waits in GET_LOCK.
  const auto n = scalar(
      "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE (STATE = 'User lock' AND "
      "LOCATE('warden_grant(" +
      lock + "', INFO) > 0) OR (COMMAND = 'Query' AND LOCATE('warden_take(" + lock +
      "', INFO) > 0 AND (STATE = 'User lock' OR ID <=> IS_USED_LOCK('" + name_sql + "/t')))");
  return n ? std::stoul(*n) : 0;
}

}  // namespace warden::testing

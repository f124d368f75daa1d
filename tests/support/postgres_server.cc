#include "support/postgres_server.h"

#include <libpq-fe.h>
#include <signal.h>
#include <sys/shm.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace warden::testing {
namespace {

using namespace std::chrono_literals;

constexpr const char* kBin = "/usr/lib/postgresql/15/bin/";
constexpr auto kStartLimit = 60s;
constexpr const char* kServerUser = "postgres";

bool as_root() { return ::geteuid() == 0; }

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string tail(const std::string& text, std::size_t bytes = 3000) {
  return text.size() <= bytes ? text : text.substr(text.size() - bytes);
}

std::string hex(const std::string& bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const char c : bytes) {
    out += kHex[static_cast<unsigned char>(c) >> 4];
    out += kHex[static_cast<unsigned char>(c) & 0xF];
  }
  return out;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// `argv` run as the server's user when running as root (PostgreSQL refuses to run as
// root).
std::vector<std::string> run_as_server_user(std::vector<std::string> argv) {
  if (!as_root()) return argv;
  std::vector<std::string> out{"setpriv", "--reuid=" + std::string(kServerUser),
                               "--regid=" + std::string(kServerUser), "--init-groups", "--"};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

// Gives `dir` and everything in it to the server's user, when running as root.
void give_to_server_user(const std::filesystem::path& dir) {
  if (!as_root()) return;
  const std::string chown =
      "chown -R " + std::string(kServerUser) + ": " + shell_quote(dir.string());
  if (std::system(chown.c_str()) != 0) throw std::runtime_error("cannot " + chown);
}

// initdb costs about a second of CPU (a bootstrap backend and a single-user one) and a
// copy of its result a tenth of that: run once per process, copied per server, as the
// MariaDB fixture does with mariadb-install-db. Every server has the same superuser and
// password, so nothing initdb writes differs between them.
const std::filesystem::path& template_data_dir() {
  static TempDir dir("warden-pg-template");
  static std::once_flag once;
  static std::filesystem::path data;
  std::call_once(once, [] {
    data = dir.path() / "data";
    {
      std::ofstream pw(dir.path() / "pwfile");
      pw << PostgresServer::kPassword << '\n';
    }
    give_to_server_user(dir.path());
    std::string initdb;
    for (const auto& arg : run_as_server_user(
             {std::string(kBin) + "initdb", "-D", data.string(), "-U", PostgresServer::kSuperuser,
              "--pwfile", (dir.path() / "pwfile").string(), "--auth-host=scram-sha-256",
              "--auth-local=trust", "-N", "-E", "UTF8", "--locale=C"})) {
      initdb += shell_quote(arg) + ' ';
    }
    const auto init_log = dir.path() / "initdb.log";
    initdb += "> " + shell_quote(init_log.string()) + " 2>&1";
    if (std::system(initdb.c_str()) != 0) {
      throw std::runtime_error("initdb failed: " + tail(read_file(init_log)));
    }
  });
  return data;
}

}  // namespace

PostgresServer::PostgresServer() : dir_("warden-pg"), port_(free_port()) {
  const auto data = dir_.path() / "data";
  const auto sockets = dir_.path() / "sockets";
  std::filesystem::create_directories(sockets);
  std::filesystem::copy(template_data_dir(), data, std::filesystem::copy_options::recursive);
  give_to_server_user(dir_.path());
  process_ = ServerProcess(
      as_server_user({std::string(kBin) + "postgres", "-D", data.string(), "-p",
                      std::to_string(port_), "-k", sockets.string(), "-c",
                      "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=300",
                      "-c", "shared_buffers=16MB", "-c", "log_min_messages=warning",
                      // Its dynamic segments in the data dir, which goes with the test,
                      // not in /dev/shm, where a killed server leaves them.
                      "-c", "dynamic_shared_memory_type=mmap"}),
      dir_.path() / "postgres.log");
  start();
}

PostgresServer::~PostgresServer() {
  // An immediate shutdown (SIGQUIT), thawed first in case a test froze it: the postmaster
  // removes its shared memory as it exits. Whatever a kill left is removed here.
  process_.signal_family(SIGCONT);
  process_.stop(SIGQUIT, 5s);
  // A postmaster that exits cleanly removes its segment itself; one killed with SIGKILL
  // leaves it for good, and runs that leak one per server exhaust the machine's segments
  // (kernel.shmmni) within a few days.
  if (const int id = shared_memory_id(); id >= 0) (void)shmctl(id, IPC_RMID, nullptr);
}

int PostgresServer::shared_memory_id() const {
  std::ifstream pid_file(data_dir() / "postmaster.pid");
  std::string line;
  for (int i = 0; i < 7 && std::getline(pid_file, line); ++i) {
  }
  std::istringstream fields(line);  // the 7th line: "key shmid"
  long key = 0;
  int id = -1;
  return fields >> key >> id ? id : -1;
}

std::vector<std::string> PostgresServer::as_server_user(std::vector<std::string> argv) const {
  return run_as_server_user(std::move(argv));
}

std::string PostgresServer::uri(const std::string& query) const {
  return uri_as(kSuperuser, kPassword, kDatabase, query);
}

std::string PostgresServer::uri_as(const std::string& user, const std::string& password,
                                   const std::string& database, const std::string& query) const {
  return "postgres://" + user + ':' + password + "@127.0.0.1:" + std::to_string(port_) + '/' +
         database + query;
}

void PostgresServer::kill9() { process_.kill9_family(); }

void PostgresServer::start() {
  const auto deadline = std::chrono::steady_clock::now() + kStartLimit;
  while (true) {
    if (!process_.running()) process_.start();
    while (process_.running() && std::chrono::steady_clock::now() < deadline) {
      if (accepts_logins()) return;
      std::this_thread::sleep_for(50ms);
    }
    // It exited: after a kill -9, old backends may still hold the shared memory for a
    // moment ("pre-existing shared memory block is still in use"); try again.
    if (std::chrono::steady_clock::now() >= deadline) {
      throw std::runtime_error("postgres did not come up: " + tail(process_.log_text()));
    }
    std::this_thread::sleep_for(200ms);
  }
}

bool PostgresServer::accepts_logins() const {
  const std::string info = "host=127.0.0.1 port=" + std::to_string(port_) + " user=" + kSuperuser +
                           " password=" + kPassword + " dbname=" + kDatabase + " connect_timeout=2";
  PGconn* conn = PQconnectdb(info.c_str());
  const bool ok = PQstatus(conn) == CONNECTION_OK;
  PQfinish(conn);
  return ok;
}

std::vector<std::vector<std::string>> PostgresServer::query(const std::string& sql,
                                                            const std::string& database) const {
  const std::string info = "host=127.0.0.1 port=" + std::to_string(port_) + " user=" + kSuperuser +
                           " password=" + kPassword + " dbname=" + database +
                           // A probe of the test, not the engine under test: a loaded
                           // machine once took more than 5 s to fork a backend and
                           // answer the password exchange.
                           " connect_timeout=30";
  std::unique_ptr<PGconn, decltype(&PQfinish)> conn(PQconnectdb(info.c_str()), &PQfinish);
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    throw std::runtime_error(std::string("probe cannot connect: ") + PQerrorMessage(conn.get()));
  }
  std::unique_ptr<PGresult, decltype(&PQclear)> result(PQexec(conn.get(), sql.c_str()), &PQclear);
  const auto status = PQresultStatus(result.get());
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
    throw std::runtime_error("probe: " + sql + ": " + PQresultErrorMessage(result.get()));
  }
  std::vector<std::vector<std::string>> rows;
  for (int r = 0; r < PQntuples(result.get()); ++r) {
    std::vector<std::string> row;
    for (int c = 0; c < PQnfields(result.get()); ++c)
      row.emplace_back(PQgetvalue(result.get(), r, c));
    rows.push_back(std::move(row));
  }
  return rows;
}

std::optional<std::string> PostgresServer::value(const std::string& sql) const {
  const auto rows = query(sql);
  if (rows.empty() || rows.front().empty()) return std::nullopt;
  return rows.front().front();
}

std::string pg_advisory_rows(const std::string& id_sql) {
  return "locktype = 'advisory' AND objsubid = 1 AND database = (SELECT oid FROM pg_database "
         "WHERE datname = current_database()) AND classid = ((" +
         id_sql + ") >> 32 & 4294967295)::oid AND objid = ((" + id_sql + ") & 4294967295)::oid";
}

std::string pg_lock_id_sql(const std::string& group, const std::string& name) {
  return "SELECT id FROM warden.locks WHERE grp = '" + group + "' AND name = '\\x" + hex(name) +
         "'::bytea";
}

}  // namespace warden::testing

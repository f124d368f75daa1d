#include "server/server_command.h"

#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <tuple>
#include <utility>

#include "server/password_hash.h"
#include "warden/error.h"
#include "warden/version.h"

namespace warden::server {
namespace {

// One line from stdin, without its line end; echo off while a terminal types it.
std::string read_password() {
  const bool tty = ::isatty(STDIN_FILENO) == 1;
  termios saved{};
  if (tty && ::tcgetattr(STDIN_FILENO, &saved) == 0) {
    termios quiet = saved;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
    std::fprintf(stderr, "password: ");
  }
  std::string line;
  std::getline(std::cin, line);
  if (tty) {
    ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
    std::fprintf(stderr, "\n");
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

// --hash-password: the users file's second field for the password on stdin.
int print_password_hash() {
  try {
    std::string password = read_password();
    if (password.empty()) {
      std::cerr << "wardend: no password on stdin\n";
      return 64;
    }
    const std::string hash = hash_password(password);
    password.assign(password.size(), '\0');
    std::printf("%s\n", hash.c_str());
    return 0;
  } catch (const Error& e) {
    std::cerr << "wardend: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace

namespace {

// Reads "HOST:PORT" for `option` (port 0: any free port).
std::pair<std::string, std::uint16_t> host_port(const std::string& option,
                                                const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos) throw CLI::ValidationError(option, "expected HOST:PORT");
  int port = -1;
  try {
    port = std::stoi(text.substr(colon + 1));
  } catch (...) {
  }
  if (port < 0 || port > 65535) throw CLI::ValidationError(option, "bad port");
  return {text.substr(0, colon), static_cast<std::uint16_t>(port)};
}

TlsListenOptions& tls(ServerOptions& o) {
  if (!o.tls) o.tls.emplace();
  return *o.tls;
}

// The TLS options, with what each needs (CLI11 reports a missing one as a usage error).
void add_tls_options(CLI::App& app, ServerOptions& o) {
  auto* listen = app.add_option_function<std::string>(
      "--tls-listen",
      [&o](const std::string& text) {
        auto [host, port] = host_port("--tls-listen", text);
        tls(o).host = host;
        tls(o).port = port;
      },
      "also (or, with --listen none, only) serve TLS at HOST:PORT (port 0: any free port)");
  auto* cert = app.add_option_function<std::string>(
      "--tls-cert", [&o](const std::string& file) { tls(o).cert_file = file; },
      "PEM file: the server's certificate, then any intermediate CA certificates");
  auto* key = app.add_option_function<std::string>(
      "--tls-key", [&o](const std::string& file) { tls(o).key_file = file; },
      "PEM file: the certificate's private key");
  auto* ca = app.add_option_function<std::string>(
      "--tls-ca", [&o](const std::string& file) { tls(o).ca_file = file; },
      "PEM file of CAs: clients must present a certificate one of them signed (mutual TLS)");
  auto* timeout = app.add_option_function<unsigned>(
      "--tls-handshake-timeout",
      [&o](unsigned ms) {
        if (ms == 0) throw CLI::ValidationError("--tls-handshake-timeout", "must be > 0");
        tls(o).handshake_timeout = std::chrono::milliseconds(ms);
      },
      "milliseconds a TLS client has to finish its handshake (default 10000)");
  listen->needs(cert)->needs(key);
  for (CLI::Option* option : {cert, key, ca, timeout}) option->needs(listen);
}

}  // namespace

void add_server_options(CLI::App& app, ServerOptions& o) {
  // The packaged service reads /etc/warden/wardend.conf this way (see packaging/).
  app.set_config("--config", "",
                 "read options from FILE: one `long-option = value` per line (\"#\" starts a "
                 "comment); options given on the command line win over the file");
  // A misspelt key in the file is an error, not a setting silently left at its default.
  app.allow_config_extras(CLI::config_extras_mode::error);
  app.add_option_function<std::string>(
         "--listen",
         [&o](const std::string& text) {
           if (text == "none") {
             o.listen_plain = false;
             return;
           }
           o.listen_plain = true;
           std::tie(o.host, o.port) = host_port("--listen", text);
         },
         "address to listen on, HOST:PORT (port 0: any free port); none: no plain-text "
         "listener (needs --tls-listen)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)  // `--listen none` overrides
      ->default_str("127.0.0.1:7380");
  add_tls_options(app, o);
  app.add_option("--data-dir", o.data_dir,
                 "directory for the durable state (token reservations, longest lease)")
      ->default_str(o.data_dir);
  app.add_option("--requirepass", o.password, "password clients must send with AUTH first");
  app.add_option("--users", o.users_file,
                 "users file: NAME HASH GROUP-PATTERNS RIGHTS per line (docs/server.md); "
                 "reloaded on SIGHUP")
      ->check(CLI::ExistingFile);
  app.add_flag("--hash-password", o.hash_password,
               "read a password from stdin (no echo on a terminal), print its hash for the "
               "users file, and exit");
  app.add_option("--metrics-listen", o.metrics_listen,
                 "serve Prometheus metrics over HTTP at HOST:PORT/metrics");
  app.add_option("--max-connections", o.limits.max_connections, "connection limit")
      ->default_val(o.limits.max_connections);
  app.add_option("--max-keys", o.limits.max_keys, "limit on locks known at once")
      ->default_val(o.limits.max_keys);
  app.add_option("--max-waiters-per-key", o.limits.max_waiters_per_key,
                 "limit on queued requests per lock")
      ->default_val(o.limits.max_waiters_per_key);
  app.add_option("--max-request-bytes", o.max_request_bytes, "limit on one request's size")
      ->default_val(o.max_request_bytes);
  app.add_option("--max-output-bytes", o.max_output_bytes,
                 "replies pending to a client that does not read: past this its requests are "
                 "not read; pushes (REVOKE, CHANGED) past it close the connection")
      ->default_val(o.max_output_bytes)
      ->check(CLI::PositiveNumber);
  app.add_option_function<unsigned>(
         "--auth-timeout",
         [&o](unsigned ms) {
           if (ms == 0) throw CLI::ValidationError("--auth-timeout", "must be > 0");
           o.auth_timeout = std::chrono::milliseconds(ms);
         },
         "milliseconds a connection has to authenticate when AUTH is required (default "
         "10000); then it is closed")
      ->default_str(std::to_string(o.auth_timeout.count()));
  app.add_option_function<unsigned>(
         "--idle-timeout", [&o](unsigned s) { o.idle_timeout = std::chrono::seconds(s); },
         "close a connection that sent nothing for SECONDS and has no request waiting "
         "(default 0: never)")
      ->default_str(std::to_string(o.idle_timeout.count()));
  app.add_option_function<unsigned>(
         "--tcp-keepalive", [&o](unsigned s) { o.tcp_keepalive = std::chrono::seconds(s); },
         "TCP keep-alive on every connection, first probe after SECONDS of silence, so a "
         "client whose host vanished is closed (default 60; 0: off)")
      ->default_str(std::to_string(o.tcp_keepalive.count()));
  auto* cell = app.add_option("--cell", o.cell,
                              "be a member of a cell: every member as ID@A.B.C.D:PORT, "
                              "comma-separated, the same list on each (docs/cell.md); the "
                              "members talk on PORT+1");
  auto* node = app.add_option("--node", o.node, "which member of --cell this wardend is (its ID)")
                   ->check(CLI::PositiveNumber);
  cell->needs(node);
  node->needs(cell);
  app.add_option_function<unsigned>(
         "--cell-election-timeout",
         [&o](unsigned ms) { o.cell_election_timeout = std::chrono::milliseconds(ms); },
         "milliseconds a member hears no leader before it stands (default 1000); failing "
         "over takes about three of them")
      ->default_str(std::to_string(o.cell_election_timeout.count()))
      ->needs(cell);
  app.add_option_function<unsigned>(
         "--cell-heartbeat",
         [&o](unsigned ms) { o.cell_heartbeat = std::chrono::milliseconds(ms); },
         "milliseconds between the leader's heartbeats (default 100; below the election "
         "timeout)")
      ->default_str(std::to_string(o.cell_heartbeat.count()))
      ->needs(cell);
  app.add_flag("--cell-join", o.cell_join,
               "this member is being added to a running cell (wardend cell add): wait for its "
               "leader instead of starting the cell from --cell")
      ->needs(cell);
  app.add_flag("--reset-state", o.reset_state,
               "start with fresh state even though the data dir lost it: fencing tokens "
               "may go backwards (dangerous; for disaster recovery only)")
      // A one-off recovery step: never carried over from a config file into every start.
      ->configurable(false);
  app.footer(
      "Runs until SIGINT or SIGTERM; the durable state in --data-dir is kept. SIGHUP\n"
      "reloads --users (a bad file keeps the users in use and says why on stderr).\n"
      "\n"
      "Exit status:\n"
      "  0    stopped by SIGINT or SIGTERM\n"
      "  1    could not start or had to stop: address in use, data dir unreadable or\n"
      "       its state damaged (see --reset-state), out of resources\n"
      "  64   bad option (the message names it)\n"
      "\n"
      "TLS: --tls-listen, --tls-cert and --tls-key together; --tls-ca adds mutual TLS.\n"
      "A bad certificate or key file stops the start (exit 1) with a message naming it.\n");
}

int run_server(const ServerOptions& options) {
  if (options.hash_password) return print_password_hash();
  if (!options.listen_plain && !options.tls) {
    std::cerr << "wardend: --listen none needs --tls-listen (there would be nothing to "
                 "connect to)\n";
    return 64;
  }
  try {
    Server server(options);
    if (options.listen_plain) {
      std::printf("wardend %s listening on %s:%u (data dir %s)\n", WARDEN_VERSION_STRING,
                  options.host.c_str(), server.port(), options.data_dir.c_str());
    } else {
      std::printf("wardend %s started without a plain-text listener (data dir %s)\n",
                  WARDEN_VERSION_STRING, options.data_dir.c_str());
    }
    if (options.tls) {
      std::printf("wardend TLS listening on %s:%u (mTLS: %s)\n", options.tls->host.c_str(),
                  server.tls_port(), options.tls->ca_file.empty() ? "no" : "yes");
    }
    if (server.metrics_port() != 0) {
      std::printf("wardend metrics on http://%s/metrics\n", options.metrics_listen.c_str());
    }
    std::fflush(stdout);
    server.run();
    std::printf("wardend stopped\n");
    return 0;
  } catch (const Error& e) {
    std::cerr << "wardend: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "wardend: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace warden::server

#include "server/server_command.h"

#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

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

void add_server_options(CLI::App& app, ServerOptions& o) {
  app.add_option_function<std::string>(
         "--listen",
         [&o](const std::string& text) {
           const auto colon = text.rfind(':');
           if (colon == std::string::npos)
             throw CLI::ValidationError("--listen", "expected HOST:PORT");
           o.host = text.substr(0, colon);
           int port = -1;
           try {
             port = std::stoi(text.substr(colon + 1));
           } catch (...) {
           }
           if (port < 0 || port > 65535) throw CLI::ValidationError("--listen", "bad port");
           o.port = static_cast<std::uint16_t>(port);
         },
         "address to listen on, HOST:PORT (port 0: any free port)")
      ->default_str("127.0.0.1:7380");
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
  app.add_flag("--reset-state", o.reset_state,
               "start with fresh state even though the data dir lost it: fencing tokens "
               "may go backwards (dangerous; for disaster recovery only)");
  app.footer(
      "Runs until SIGINT or SIGTERM; the durable state in --data-dir is kept. SIGHUP\n"
      "reloads --users (a bad file keeps the users in use and says why on stderr).\n"
      "\n"
      "Exit status:\n"
      "  0    stopped by SIGINT or SIGTERM\n"
      "  1    could not start or had to stop: address in use, data dir unreadable or\n"
      "       its state damaged (see --reset-state), out of resources\n"
      "  64   bad option (the message names it)\n");
}

int run_server(const ServerOptions& options) {
  if (options.hash_password) return print_password_hash();
  try {
    Server server(options);
    std::printf("wardend %s listening on %s:%u (data dir %s)\n", WARDEN_VERSION_STRING,
                options.host.c_str(), server.port(), options.data_dir.c_str());
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

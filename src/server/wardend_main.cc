// wardend — warden's lock server. Same as `warden server`.
#include <CLI/CLI.hpp>

#include "server/server_command.h"
#include "warden/version.h"

int main(int argc, char** argv) {
  CLI::App app{"wardend: warden's lock server (RESP2 protocol, see docs/protocol.md)"};
  app.set_version_flag("--version", std::string("wardend ") + WARDEN_VERSION_STRING);
  warden::server::ServerOptions options;
  warden::server::add_server_options(app, options);
  CLI11_PARSE(app, argc, argv);
  return warden::server::run_server(options);
}

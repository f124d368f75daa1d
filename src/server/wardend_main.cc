// wardend — warden's lock server. Same as `warden server`.
#include <CLI/CLI.hpp>

#include "server/cell/cell_admin.h"
#include "server/server_command.h"
#include "warden/version.h"

int main(int argc, char** argv) {
  CLI::App app{"wardend: warden's lock server (RESP2 protocol, see docs/protocol.md)"};
  app.set_version_flag("--version", std::string("wardend ") + WARDEN_VERSION_STRING);
  warden::server::ServerOptions options;
  warden::server::add_server_options(app, options);
  warden::server::cell::CellAdminOptions cell_admin;
  CLI::App* cell = warden::server::cell::add_cell_admin(app, cell_admin);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version arrive as "errors" with status 0. Any bad option is a usage
    // error, 64 like every warden command, whatever CLI11's own code for it.
    const int printed = app.exit(e);
    return printed == 0 ? 0 : 64;
  }
  if (cell->parsed()) return warden::server::cell::run_cell_admin(cell_admin);
  return warden::server::run_server(options);
}

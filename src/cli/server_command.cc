#include "cli/server_command.h"

#include <memory>

#include "server/server_command.h"

namespace warden::cli {

void add_server_command(Commands& commands) {
  auto options = std::make_shared<server::ServerOptions>();
  CLI::App& app = commands.add("server", "run warden's lock server (wardend) in the foreground",
                               [options] { return server::run_server(*options); });
  server::add_server_options(app, *options);
}

}  // namespace warden::cli

#include "server/cell/cell_admin.h"

#include <cstdio>
#include <memory>
#include <span>
#include <string_view>

#include "core/uri.h"
#include "engines/resp_client/connection.h"
#include "engines/warden/cell_locator.h"
#include "engines/warden/warden_config.h"
#include "server/cell/cell_member.h"
#include "warden/error.h"
#include "warden/options.h"

namespace warden::server::cell {

CLI::App* add_cell_admin(CLI::App& app, CellAdminOptions& options) {
  CLI::App* cell = app.add_subcommand("cell", "change a running cell's members (docs/cell.md)");
  cell->require_subcommand(1);
  CLI::App* add = cell->add_subcommand(
      "add", "add a member, started first with --cell-join; answered once it is committed");
  CLI::App* remove = cell->add_subcommand("remove", "remove a member (stop it afterwards)");
  for (CLI::App* sub : {add, remove}) {
    sub->add_option("--url", options.url, "the cell: warden://[:PASSWORD@]H1:P1,H2:P2,...")
        ->required();
    sub->add_option_function<unsigned>(
           "--timeout", [&options](unsigned s) { options.timeout = std::chrono::seconds(s); },
           "seconds to wait for the change to be committed (default 120)")
        ->check(CLI::PositiveNumber);
  }
  add->add_option("member", options.member, "the new member: ID@A.B.C.D:PORT")->required();
  remove->add_option("id", options.member, "the member's ID")->required();
  add->callback([&options] { options.add = true; });
  return cell;
}

int run_cell_admin(const CellAdminOptions& options) {
  std::vector<std::string> args = {"CELL", options.add ? "ADD" : "REMOVE", options.member};
  engines::wardend::WardenConfig config;
  try {
    if (options.add) (void)parse_cell_members(options.member);  // refused here, not there
    ClientOptions client;
    client.op_timeout = std::chrono::seconds(10);
    config = engines::wardend::parse_config(core::Uri::parse(options.url), client);
  } catch (const Error& e) {
    std::fprintf(stderr, "wardend cell: %s\n", e.what());
    return 64;
  }
  try {
    std::unique_ptr<engines::resp_client::Connection> conn;
    if (config.cell.empty()) {
      conn = engines::resp_client::Connection::open(config.connect);
    } else {
      engines::wardend::CellLocator leader(config.cell);
      conn = leader.connect(config.connect, nullptr);
    }
    const engines::resp_client::Reply reply =
        conn->command(std::span<const std::string>(args), Clock::now() + options.timeout);
    if (reply.is_error()) {
      std::fprintf(stderr, "wardend cell: %s refused: %s\n", conn->endpoint().c_str(),
                   reply.text.c_str());
      return 1;
    }
    std::printf("wardend cell: member %s %s (leader %s)\n", options.member.c_str(),
                options.add ? "added" : "removed", conn->endpoint().c_str());
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "wardend cell: %s\n", e.what());
    return 1;
  }
}

}  // namespace warden::server::cell

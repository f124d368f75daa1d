// server/cell/cell_admin.h — `wardend cell add|remove`: changes a running cell's members
// by asking its leader (CELL ADD / CELL REMOVE), found as warden:// finds it.
//
//   wardend cell add --url warden://:PASSWORD@h1:p1,h2:p2,h3:p3 4@10.0.0.4:7380
//   wardend cell remove --url warden://:PASSWORD@h1:p1,h2:p2,h3:p3 3
//
// A member to add is started first with `--cell-join` (and a --cell list naming it): it
// waits with an empty log until the leader sends it one. The change is answered once it
// is committed; the new member votes only once it has caught up with the log.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <string>

namespace warden::server::cell {

struct CellAdminOptions {
  std::string url;     // the cell's members, warden:// or wardens://
  std::string member;  // add: ID@A.B.C.D:PORT; remove: ID
  bool add = false;
  std::chrono::seconds timeout{120};  // for the change to be committed
};

// Adds the `cell` subcommand (with `add` and `remove`) to `app`; `options` is filled in
// when one of them is given. Returns the `cell` subcommand.
CLI::App* add_cell_admin(CLI::App& app, CellAdminOptions& options);

// Runs the change and prints what happened. Returns 0 when the change is committed,
// 1 when the cell refused it or could not be reached, 64 for a bad URL or member.
int run_cell_admin(const CellAdminOptions& options);

}  // namespace warden::server::cell

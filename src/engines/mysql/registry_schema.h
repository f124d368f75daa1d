// engines/mysql/registry_schema.h — the tables and the stored function warden keeps in
// the database of a mysql:// URI, created on first use.
//
//   warden_locks   one row per lock ever used: (grp, name) → id, the lock's name on
//                  the server ("warden:DATABASE:ID", so any name of 1..512 bytes fits
//                  the server's 64-character GET_LOCK limit and is never truncated).
//                  Its token column is that of registries before warden_token_ceiling,
//                  read once to start the ceiling above it.
//   warden_token_ceiling (InnoDB) one row: no token ever handed out is above it
//   warden_token_next (MEMORY) one row: the last token drawn, and a copy of the
//                  ceiling; emptied by a restart, then started again at the ceiling
//   warden_holders (MEMORY) lock id → the session holding it and its token, for check
//                  and status; emptied by a restart, like the locks themselves
//   warden_token(lock id, GET_LOCK's result) → (that result, token): draws the token
//                  of a grant and records its holder (registry_schema.cc says how)
//   warden_fences  the highest token each lock's resource has seen
//   warden_fence(grp, name, token) → TRUE iff token >= every token fenced before for
//                  (grp, name), which it records; for a WHERE clause in the user's own
//                  transaction (docs/engines/mysql.md)
#pragma once

#include "engines/mysql/connection.h"
#include "engines/mysql/mysql_config.h"

namespace warden::engines::mysql {

// Tokens drawn per durable raise of warden_token_ceiling (one redo log flush).
inline constexpr int kTokenBlock = 1000;

// Creates what is missing, under a GET_LOCK of its own so that clients opening at the
// same time do not race each other's DDL. Creates nothing that exists (so a user without
// CREATE rights works once the registry is there). Throws Error(permission_denied)
// naming the missing privilege, or like Connection::query.
void install_registry(Connection& connection, const MysqlConfig& config);

}  // namespace warden::engines::mysql

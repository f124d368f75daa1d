// engines/mysql/registry_schema.h — the tables and the stored function warden keeps in
// the database of a mysql:// URI, created on first use.
//
//   warden_locks   one row per lock ever used: (grp, name) → id, the lock's name on
//                  the server ("warden:DATABASE:ID", so any name of 1..512 bytes fits
//                  the server's 64-character GET_LOCK limit and is never truncated).
//   warden_tokens  a SEQUENCE: every grant's token is its next value
//   warden_token_sync (InnoDB) one row, updated to commit: the commit makes the
//                  sequence's last cache refill durable (mysql_engine.cc, tokens)
//   warden_holders (MEMORY) lock id → a session that held it and its token, written
//                  at a grant's first renewal: a hint for status (mysql_inspect.cc)
//   warden_grant(name, wait) → token, 0 (timed out), NULL (killed) or kIsSemaphore:
//                  GET_LOCK, then the token and its token lock "NAME/TOKEN", in one
//                  statement
//   warden_semaphores (InnoDB) lock id → the N a semaphore was last opened with
//   warden_take(name, k, N, wait) → token, 0, NULL, or -1 (a lock holds the name) or
//                  -2 (the semaphore's stored N is another): k permits of N through a
//                  FIFO turnstile "NAME/t" and slot locks "NAME/s<i>"
//   warden_leaders (InnoDB) lock id → an election leader's token and value
//   warden_fences  the highest token each lock's resource has seen
//   warden_fence(grp, name, token) → TRUE iff token >= every token fenced before for
//                  (grp, name), which it records; for a WHERE clause in the user's own
//                  transaction (docs/engines/mysql.md)
#pragma once

#include <cstdint>

#include "engines/mysql/connection.h"
#include "engines/mysql/mysql_config.h"

namespace warden::engines::mysql {

// Values warden_tokens hands out per write of its table (its CACHE).
inline constexpr int kTokenCache = 10000;

// What warden_grant returns, having released the lock again, for a name that is a
// semaphore in use.
inline constexpr std::uint64_t kIsSemaphore = 18446744073709551615ULL;

// Creates what is missing, under a GET_LOCK of its own so that clients opening at the
// same time do not race each other's DDL. Creates nothing that exists (so a user without
// CREATE rights works once the registry is there). Throws Error(permission_denied)
// naming the missing privilege, or like Connection::query.
void install_registry(Connection& connection, const MysqlConfig& config);

}  // namespace warden::engines::mysql

// engines/redlock/redlock_engine.h — redlock://: an exclusive lock held by a majority
// of N independent Redis masters (Redlock), with a fencing token drawn from a quorum
// (docs/engines/redlock.md).
//
// Acquire: SET NX PX of a value unique to the attempt on every master at once, each
// master's part bounded by a round timeout far below the TTL; granted when a quorum
// (N/2 + 1) set it and the lease still has validity left (TTL - elapsed - drift). The
// token is then fixed: one more than the largest last token (and master clock) the
// quorum read, written back to a quorum of the masters that hold the key before the
// grant is handed out, so any two grants' quorums share a master that saw both. A
// failed attempt deletes its key on every master that did not clearly refuse it (a
// lost reply may hide a success) and is retried after a random pause.
//
// A master that is down, times out or answers an error is a failed vote; it never
// aborts the round. Renewals (compare-and-extend) count only with a quorum within the
// remaining validity; release is compare-and-delete on every master.
//
// Exclusive and non-fair only: Redlock has no queue and no shared holders, and lock-
// delay would need every master to agree on when a lease expired. Those are refused as
// unsupported rather than emulated.
#pragma once

#include <memory>

#include "core/engine.h"
#include "core/uri.h"
#include "engines/redis/redis_config.h"
#include "warden/options.h"

namespace warden::engines::redlock {

// Throws Error(invalid_argument) for a bad URI; unavailable if fewer than a quorum of
// masters answer PING; permission_denied if a master refuses the credentials.
std::unique_ptr<core::Engine> open(const core::Uri& uri, const ClientOptions& options);

// redis://…?layout=simple (docs/engines/redis.md, Layout simple): the classic one-key
// lock on one server, which redis-py's Lock and other SET NX PX locks share.
std::unique_ptr<core::Engine> open_simple(const redis::RedisConfig& redis,
                                          const ClientOptions& options);

}  // namespace warden::engines::redlock

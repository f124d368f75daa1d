// server/dispatcher.h — wardend's command logic: parsed requests in, replies out.
//
// Like the LockTable it owns, the dispatcher is single-threaded, does no I/O and takes
// time as an argument, so it is tested without sockets. The network shell (server.cc)
// reads frames, calls execute() per request, writes the replies, and stops reading
// from a connection while one of its requests is parked (a blocking ACQUIRE), exactly
// like a Redis client blocked in BLPOP. Replies for parked requests that are resolved
// later (granted, timed out) come back from take_wakeups().
//
// Owner secrets: every grant has 128 unguessable bits that only its ACQUIRE reply carries.
// RENEW and RELEASE must present them; a wrong secret is answered exactly like a grant
// that is not held. The table knows grants by token, which is sequential and public
// (sequencers, INSPECT), so the secret is what makes a grant its holder's alone. Secrets
// are computed from the grant with a key of this process's own (owner_secrets.h), so a
// held lock stores none; they never appear in INSPECT, LIST, INFO or stats.
//
// Users (--users FILE, see users_file.h and rights.h): `AUTH user password` parks the
// connection like a blocking ACQUIRE while the shell checks the password off the loop
// (take_auth_checks, then auth_checked with the result, which becomes a wakeup). The
// dispatcher itself never hashes. A connection remembers its user's *name*; every
// command looks the name up in the current table, so a reloaded file (set_users)
// applies to the next command of every connection, and a connection whose user was
// removed is answered NOAUTH and must authenticate again. `AUTH password` (or `AUTH
// default password`) is the --requirepass user, with every right on every group.
//
// Lock caching (REVOKES, ACQUIRE ... CACHE id): a client keeps a released lock granted
// and reuses it without I/O until someone else wants it. `REVOKES` makes a connection the
// client's revoke listener; a lock's grant asked with `CACHE id`, id a live listener's
// connection, is remembered as cached by that listener. When an ACQUIRE or ACQUIRESET on
// the key is not granted at once, or when the cached grant itself is made while others
// queue for its key, the listener is pushed `REVOKE key token`, once per grant: the entry
// is dropped then, and the grant stays an ordinary one until its holder releases it.
// Entries live no longer than their grants and are not part of a snapshot.
//
// Tagged waits (WAITS, ACQUIRE ... TAG t, WITHDRAW t; dispatcher_waits.cc): one connection
// carries many waiting acquires at once. Its answers are `[tag, reply]` in the order they
// resolve, so a parked request never stops the connection being read, and WITHDRAW
// cancels one request the way a half-close cancels a parked one.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "server/owner_secrets.h"
#include "server/table_snapshot.h"
#include "server/users_file.h"
#include "table/lock_table.h"

namespace warden::server {

using ConnId = std::uint64_t;
using table::Time;

struct Limits {
  std::size_t max_connections = 10'000;
  std::size_t max_keys = 2'000'000;
  std::size_t max_waiters_per_key = 10'000;
  // Password checks (AUTH user password) queued or running at once; more get LIMIT.
  std::size_t max_pending_auth = 64;
};

struct DispatcherConfig {
  Limits limits;
  std::string password;  // empty: no AUTH required
  std::string version;
  Time started{};  // for INFO's uptime_ms
  std::shared_ptr<const UserTable> users =
      nullptr;  // null: no --users (AUTH user ignores the user)
  // Lines INFO adds at its end, each `name:value\r\n` (a cell's leader: the cell).
  std::function<std::string()> extra_info{};
};

// Decides whether a grant may happen now (restart embargo) and makes a longer hold
// durable before it is granted. The default allows everything and persists nothing.
class GrantGuard {
 public:
  virtual ~GrantGuard() = default;
  // Milliseconds until grants are allowed again after a restart; 0 when allowed.
  virtual std::uint64_t embargo_ms(Time /*now*/) const { return 0; }
  // Called before a grant with this lease + lock-delay may be handed out; throws
  // warden::Error if that could not be made durable.
  virtual void note_hold(std::chrono::milliseconds /*ttl_plus_delay*/) {}
};

struct DispatcherStats {
  std::size_t connections = 0;
  std::size_t parked = 0;
  std::size_t cached = 0;  // grants cached by a revoke listener, their revokes not yet pushed
  std::uint64_t commands = 0;
  std::uint64_t grants = 0;
  std::uint64_t timeouts = 0;
  std::uint64_t expirations = 0;
  std::uint64_t errors = 0;
  table::TableStats table;
};

class Dispatcher {
 public:
  enum class Outcome {
    replied,  // `reply` holds the reply; go on with the next request
    parked,   // no reply yet: stop reading this connection until take_wakeups() has it
    close,    // `reply` holds a last reply; close the connection after writing it
  };

  // `tokens` and `guard` must outlive the dispatcher (nullptr: in-memory defaults).
  Dispatcher(DispatcherConfig config, table::TokenSource* tokens, GrantGuard* guard);

  // false (and nothing changes) when the connection limit is reached.
  bool connect(ConnId conn);
  // Whether `conn` may send commands other than AUTH (always, without a password).
  bool authenticated(ConnId conn) const;
  // Whether `conn` may change what the server is (a cell's members): authenticated, and
  // with --users, as the --requirepass user (who has every right).
  bool may_administer(ConnId conn) const;
  // Forgets the connection; its parked waiter leaves the queue at once. Its grants
  // stay: they live until released or expired.
  void disconnect(ConnId conn, Time now);

  // The peer half-closed: its parked request (if any) is cancelled and answered nil,
  // unless it was granted first (then its grant reply is already in take_wakeups()).
  // Either way the client, still reading, learns the truth and leaves no trace.
  void cancel_parked(ConnId conn, Time now);

  // Executes one request. `now` is when the request was read.
  Outcome execute(ConnId conn, std::span<const std::string_view> args, Time now,
                  std::string& reply);

  // Applies the passage of time (lease expiry, wait deadlines, lock-delay ends).
  void advance(Time now);
  std::optional<Time> next_wakeup() const;

  // Replies to parked requests that were resolved since the last call, in order.
  struct Wakeup {
    ConnId conn;
    std::string reply;
  };
  std::vector<Wakeup> take_wakeups();

  // Planned restarts (server/table_snapshot.h; defined in dispatcher_snapshot.cc).
  //
  // Drops every queued request without a reply, as their connections are about to close;
  // the back of each queue goes first, so no removal lets anything be granted.
  void drop_waiters(Time now);
  // The grants held at `now` (time applied first), with their owner secrets, lease
  // lengths and lock-delays, and the lock-delays running then. The state record is left
  // for the caller to fill in.
  TableSnapshot snapshot(Time now);
  // Puts a snapshot's grants into the table, each held with its token and secret and a
  // full lease from `now`, belonging to no connection (renewed and released by token and
  // secret from any), and its lock-delays with all they had left. Call before any request.
  // Returns how many grants were restored; one the table refuses (it could not have been
  // held beside the others; decode_table_snapshot lets none through) is skipped.
  std::size_t restore(const TableSnapshot& snapshot, Time now);

  // A wardend cell's leader (server/cell/): what every member must hold of the grants.
  //
  // Turns the table's change recording on (table::LockTable::record_changes).
  void record_changes() { table_.record_changes(true); }
  // The keys whose holders or lock-delay changed since the last call.
  std::vector<std::string> take_changed_keys() { return table_.take_changed_keys(); }
  // The holders of `keys` (none for a key not held) with their owner secrets, and their
  // running lock-delays, as snapshot() has them, without applying time.
  TableSnapshot snapshot_keys(std::span<const std::string> keys, Time now) const;
  // The last fencing token drawn (0 before the first).
  std::uint64_t last_token() const { return tokens_->last(); }

  // Replaces the users table (a reloaded --users file); the next command of every
  // connection is judged by it. Null turns named users off again.
  void set_users(std::shared_ptr<const UserTable> users);

  // A password check the shell runs off the loop: does `password` match `hash`? The
  // answer goes back to auth_checked(id, ...). An unknown user's check is against a
  // decoy hash, so it costs the same and the answer is ignored.
  struct AuthCheck {
    std::uint64_t id;
    std::string hash;
    std::string password;
  };
  std::vector<AuthCheck> take_auth_checks();
  // The result of a check; its connection's AUTH is answered (a wakeup). A check whose
  // connection is gone, or an unknown id, is ignored.
  void auth_checked(std::uint64_t id, bool matched);

  DispatcherStats stats() const;
  const table::LockTable& table() const { return table_; }

 private:
  struct Connection {
    bool authenticated = false;
    // The key this connection watches (WATCH): it then takes only PING and QUIT, so it
    // is never parked, and every change of the key's holders pushes it a CHANGED.
    std::optional<std::string> watching;
    // A revoke listener (REVOKES): it then takes only PING and QUIT, and is pushed a
    // REVOKE for each grant cached by it that someone else wants.
    bool listening = false;
    // A waits connection (WAITS): it takes only ACQUIRE ... TAG t, WITHDRAW t and QUIT,
    // and answers each tagged request with `[tag, reply]` once it resolves. Its queued
    // requests by tag; never `parked`.
    bool waits = false;
    std::unordered_map<std::string, table::RequestId> tagged;
    std::string user;  // the named user it authenticated as; "": the default user
    std::optional<table::RequestId> parked;
    std::optional<std::uint64_t> auth;  // a password check in progress (parked too)
  };
  struct PendingAuth {
    ConnId conn;
    std::string user;  // "" when the name is unknown: the check is a decoy
  };
  // Sent as 32 lower-case hex characters.
  using Secret = OwnerSecrets::Secret;
  struct Parked {
    ConnId conn;
    Time received;
    // ACQUIRE ... CACHE id: the listener the grant is to be cached by, if it still is one
    // when the grant is made.
    std::optional<ConnId> cache{};
    // Non-empty for a tagged request (a waits connection's): its answer is `[tag, reply]`.
    std::string tag{};
  };

  Outcome auth(Connection& c, ConnId conn, std::span<const std::string_view> args,
               std::string& reply);
  // Throws NOPERM (or NOAUTH for a user no longer in the table) unless the connection's
  // user may run `cmd` with `args`.
  void authorize(Connection& c, const std::string& cmd, std::span<const std::string_view> args);
  // `tag`: a waits connection's tagged request, queued under that tag instead of parking
  // the connection (Outcome::parked still says it was queued).
  Outcome acquire(Connection& c, ConnId conn, std::span<const std::string_view> args, Time now,
                  std::string& reply, const std::string* tag = nullptr);
  // A command on a waits connection (dispatcher_waits.cc): ACQUIRE ... TAG t or WITHDRAW t.
  // A request whose tag cannot be told gets an untagged error and closes the connection.
  Outcome tagged(Connection& c, ConnId conn, const std::string& cmd,
                 std::span<const std::string_view> args, Time now, std::string& reply);
  // WAITS: the connection becomes a waits connection (see Connection::waits).
  void start_waits(Connection& c, std::span<const std::string_view> args, std::string& reply);
  // Cancels every tagged request of `c` still queued; `answer`: each is answered
  // `[tag, nil]` (a half-close), else dropped silently (the connection is gone).
  void withdraw_all(Connection& c, ConnId conn, Time now, bool answer);
  // ACQUIRESET: a multi-lock granted in one step (table::SetRequest).
  Outcome acquire_set(Connection& c, ConnId conn, std::span<const std::string_view> args, Time now,
                      std::string& reply);
  // What every grant needs before the table is asked: no restart embargo, time applied,
  // and the hold made durable.
  void prepare_grant(std::chrono::milliseconds ttl_plus_delay, Time now);
  // RENEW and RELEASE: does `secret` (as sent) belong to the grant (key, token)? false
  // for a grant that is not held and for a wrong secret alike, in constant time per byte.
  bool owns(std::string_view key, std::uint64_t token, const Secret& secret) const;
  // The owner secret of a grant held: the one restored with it, or the one computed.
  Secret secret_of(const table::Grant& grant) const;
  void info(Time now, std::string& reply) const;
  // Appends the holders of `key` and its lock-delay to `out` (see snapshot()).
  void add_key(TableSnapshot& out, const std::string& key, Time now) const;
  // WATCH key: the connection becomes a watcher of the key (see Connection::watching).
  void watch(Connection& c, ConnId conn, std::span<const std::string_view> args,
             std::string& reply);
  // REVOKES: the connection becomes a revoke listener (see Connection::listening).
  void listen(Connection& c, ConnId conn, std::span<const std::string_view> args,
              std::string& reply);
  // A grant asked with CACHE `listener` was made: it is cached by that listener if the
  // connection is one now (else nothing happens). `queued`: requests wait for its key,
  // so its revoke is pushed at once instead of being kept.
  void cache_grant(const table::Grant& grant, ConnId listener, bool queued);
  // A request for `key` was not granted at once: pushes the revoke of every cached
  // grant among the key's holders. Costs nothing while no grant is cached.
  void revoke_holders(std::string_view key);
  // Pushes `REVOKE key token` to the listener of the cached grant `it` (unless that
  // connection is gone or no longer listens) and forgets the entry.
  void revoke(std::unordered_map<table::RequestId, ConnId>::iterator it, std::string_view key,
              std::uint64_t token);
  // The holders of `key` (or their values) changed: pushes `CHANGED key` to its
  // watchers, once per watcher until the shell takes the wakeups.
  void touched(std::string_view key);
  void inspect(std::string_view key, Time now, std::string& reply) const;
  void list(std::span<const std::string_view> args, Time now, std::string& reply);
  // Turns the table's events into wakeups; `now` is when they happened.
  void collect(Time now);
  // Runs a table call made outside any command (timers, disconnects). Granting a queued
  // waiter draws a token, and the durable token source throws when it cannot persist a
  // reservation (disk full). The table stays consistent and serves that queue on its
  // next call, so instead of letting the error escape the event loop, the dispatcher
  // counts it and asks to be advanced again soon (next_wakeup).
  void survive(Time now, const std::function<void()>& call);

  DispatcherConfig config_;
  table::CountingTokenSource default_tokens_;
  table::TokenSource* tokens_;
  GrantGuard default_guard_;
  GrantGuard* guard_;
  table::LockTable table_;
  std::unordered_map<ConnId, Connection> connections_;
  std::unordered_map<table::RequestId, Parked> parked_;
  OwnerSecrets owner_secrets_;
  // The secrets of grants restored from a snapshot, which the previous process computed
  // with its own key, by grant id; dropped on release and expiry.
  std::unordered_map<table::RequestId, Secret> restored_secrets_;
  // The listener of every cached grant not yet revoked, by grant id; dropped on the
  // revoke's push, release and expiry, so it never outgrows the grants held.
  std::unordered_map<table::RequestId, ConnId> cached_;
  std::vector<Wakeup> wakeups_;
  // Watching connections by key, and the watchers pushed a CHANGED not yet taken.
  std::unordered_map<std::string, std::vector<ConnId>> watchers_;
  std::unordered_set<ConnId> pushed_;
  std::optional<Time> retry_at_;  // set after a failed grant; see survive()
  std::unordered_map<std::uint64_t, PendingAuth> pending_auth_;  // by check id
  std::vector<AuthCheck> auth_checks_;                           // not yet taken by the shell
  std::uint64_t next_auth_id_ = 0;
  DispatcherStats stats_;
};

}  // namespace warden::server

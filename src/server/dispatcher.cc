#include "server/dispatcher.h"

#include <openssl/crypto.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>

#include "core/names.h"
#include "server/command_reject.h"
#include "server/password_check.h"
#include "server/resp.h"
#include "server/rights.h"
#include "warden/election.h"
#include "warden/error.h"

namespace warden::server {
namespace {

using std::chrono::milliseconds;

constexpr std::uint64_t kMinTtlMs = 10;
constexpr std::uint64_t kMaxTtlMs = 7ULL * 24 * 3600 * 1000;
constexpr std::uint64_t kMaxDelayMs = 3600ULL * 1000;
// LIST's page: names per reply at most, so one reply stays small.
constexpr std::size_t kListPage = 1000;


std::uint64_t parse_u64(std::string_view text, const char* what) {
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    throw Reject{"INVALID",
                 std::string(what) + " '" + std::string(text) + "' is not a non-negative integer"};
  }
  return value;
}

// The process's resident set in bytes (resident pages in /proc/self/statm times the
// page size); 0 where that file is missing (not Linux).
std::uint64_t rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::uint64_t size_pages = 0;
  std::uint64_t resident_pages = 0;
  if (!(statm >> size_pages >> resident_pages)) return 0;
  return resident_pages * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

// An integer within min..max, or INVALID.
std::uint64_t parse_bounded(std::string_view text, const char* what, std::uint64_t min,
                            std::uint64_t max) {
  const std::uint64_t v = parse_u64(text, what);
  if (v < min || v > max) {
    throw Reject{"INVALID", std::string(what) + " " + std::to_string(v) + " is outside " +
                                std::to_string(min) + ".." + std::to_string(max)};
  }
  return v;
}

milliseconds parse_ms(std::string_view text, const char* what, std::uint64_t min,
                      std::uint64_t max) {
  const std::uint64_t v = parse_u64(text, what);
  if (v < min || v > max) {
    throw Reject{"INVALID", std::string(what) + " " + std::to_string(v) + " is outside " +
                                std::to_string(min) + ".." + std::to_string(max) + " ms"};
  }
  return milliseconds(v);
}

// "group/name" → validated key (returned as given).
std::string_view parse_key(std::string_view key) {
  const auto slash = key.find('/');
  if (slash == std::string_view::npos) {
    throw Reject{"INVALID", "key must be group/name"};
  }
  try {
    core::validate_group(key.substr(0, slash));
    core::validate_name(key.substr(slash + 1));
  } catch (const Error& e) {
    throw Reject{"INVALID", e.what()};
  }
  return key;
}

Mode parse_mode(std::string_view text) {
  const std::string m = upper(text);
  if (m == "EXCLUSIVE" || m == "X") return Mode::exclusive;
  if (m == "SHARED" || m == "S") return Mode::shared;
  throw Reject{"INVALID", "mode must be exclusive or shared"};
}

std::int64_t ms_between(Time from, Time to) {
  return std::chrono::duration_cast<milliseconds>(to - from).count();
}

using Secret = OwnerSecrets::Secret;
constexpr char kHex[] = "0123456789abcdef";

// 32 lower-case hex characters, or INVALID. Only the form is checked here, before any
// lookup, so the reply says nothing about the grant.
Secret parse_secret(std::string_view text) {
  Secret s{};
  const auto nibble = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  bool ok = text.size() == 2 * s.size();
  for (std::size_t i = 0; ok && i < s.size(); ++i) {
    const int hi = nibble(text[2 * i]);
    const int lo = nibble(text[2 * i + 1]);
    ok = hi >= 0 && lo >= 0;
    s[i] = static_cast<unsigned char>(hi * 16 + lo);
  }
  if (!ok) throw Reject{"INVALID", "secret must be 32 lower-case hex characters"};
  return s;
}

// The wait, fairness and lock-delay options ACQUIRE and ACQUIRESET share. Reads the
// option at args[i] (and its value, moving i past it); false if it is none of them.
struct WaitOptions {
  Time deadline = Time::min();  // a try unless WAIT says otherwise
  bool fair = true;
  milliseconds lock_delay{0};
};

bool parse_wait_option(std::span<const std::string_view> args, std::size_t& i, Time now,
                       WaitOptions& options) {
  const std::string opt = upper(args[i]);
  if (opt == "UNFAIR") {
    options.fair = false;
  } else if (opt == "FOREVER") {
    options.deadline = Time::max();
  } else if (opt == "WAIT" && i + 1 < args.size()) {
    const auto wait = parse_ms(args[++i], "wait", 0, kMaxTtlMs * 1000);
    options.deadline = wait.count() == 0 ? Time::min() : now + wait;
  } else if (opt == "DELAY" && i + 1 < args.size()) {
    options.lock_delay = parse_ms(args[++i], "delay", 0, kMaxDelayMs);
  } else {
    return false;
  }
  return true;
}

// An election's value: any bytes, at most kMaxLeaderValueBytes.
std::string_view parse_leader_value(std::string_view text) {
  if (text.size() > kMaxLeaderValueBytes) {
    throw Reject{"INVALID",
                 "a leader's value is at most " + std::to_string(kMaxLeaderValueBytes) + " bytes"};
  }
  return text;
}

[[noreturn]] void unknown_option(std::string_view command, std::string_view option) {
  throw Reject{"ERR", "unknown or incomplete " + std::string(command) + " option '" +
                          std::string(option.substr(0, 64)) + "'"};
}

// Throws NOPERM unless `user` may use the group of `text` (a key group/name when
// `is_key`, else a group). A group that is not valid is left to the command, which
// rejects it with INVALID.
void authorize_group(const User& user, std::string_view text, bool is_key) {
  std::string_view group = text;
  if (is_key) {
    const auto slash = group.find('/');
    if (slash == std::string_view::npos) return;
    group = group.substr(0, slash);
  }
  try {
    core::validate_group(group);
  } catch (const Error&) {
    return;
  }
  if (!any_matches(user.groups, group)) {
    throw Reject{"NOPERM",
                 "user '" + user.name + "' has no access to group '" + std::string(group) + "'"};
  }
}

void grant_reply(std::string& out, std::uint64_t token, const Secret& secret, Time received,
                 Time granted) {
  resp::array(out, 3);
  resp::integer(out, static_cast<std::int64_t>(token));
  const auto waited = std::chrono::duration_cast<std::chrono::microseconds>(granted - received);
  resp::integer(out, std::max<std::int64_t>(0, waited.count()));
  std::string hex;
  hex.reserve(2 * secret.size());
  for (const unsigned char b : secret) {
    hex += kHex[b >> 4];
    hex += kHex[b & 15];
  }
  resp::bulk(out, hex);
}

}  // namespace

Dispatcher::Dispatcher(DispatcherConfig config, table::TokenSource* tokens, GrantGuard* guard)
    : config_(std::move(config)),
      tokens_(tokens ? tokens : &default_tokens_),
      guard_(guard ? guard : &default_guard_),
      table_(tokens_) {}

bool Dispatcher::authenticated(ConnId conn) const {
  const auto it = connections_.find(conn);
  return it != connections_.end() && it->second.authenticated;
}

bool Dispatcher::may_administer(ConnId conn) const {
  const auto it = connections_.find(conn);
  return it != connections_.end() && it->second.authenticated && it->second.user.empty();
}

bool Dispatcher::connect(ConnId conn) {
  if (connections_.size() >= config_.limits.max_connections) return false;
  connections_[conn].authenticated = config_.password.empty() && !config_.users;
  return true;
}

void Dispatcher::disconnect(ConnId conn, Time now) {
  auto it = connections_.find(conn);
  if (it == connections_.end()) return;
  const auto parked = it->second.parked;
  if (it->second.auth) pending_auth_.erase(*it->second.auth);  // its result is dropped
  if (it->second.watching) {
    auto w = watchers_.find(*it->second.watching);
    std::erase(w->second, conn);
    if (w->second.empty()) watchers_.erase(w);
    pushed_.erase(conn);
  }
  withdraw_all(it->second, conn, now, false);
  connections_.erase(it);
  if (parked) {
    parked_.erase(*parked);
    survive(now, [&] { table_.cancel(*parked, now); });
  }
  survive(now, [&] { collect(now); });
}

void Dispatcher::cancel_parked(ConnId conn, Time now) {
  auto it = connections_.find(conn);
  if (it != connections_.end() && it->second.auth) {
    // An AUTH still being checked: answered now, and the connection stays as it was.
    pending_auth_.erase(*it->second.auth);
    it->second.auth.reset();
    Wakeup w{conn, {}};
    resp::error(w.reply, "ERR", "AUTH cancelled: the client closed its side");
    wakeups_.push_back(std::move(w));
    return;
  }
  if (it != connections_.end() && it->second.waits) {
    withdraw_all(it->second, conn, now, true);
    return;
  }
  if (it == connections_.end() || !it->second.parked) return;
  const table::RequestId id = *it->second.parked;
  survive(now, [&] {
    if (table_.cancel(id, now)) {
      parked_.erase(id);
      it->second.parked.reset();
      Wakeup w{conn, {}};
      resp::nil(w.reply);
      wakeups_.push_back(std::move(w));
    }
    collect(now);
  });
}

Dispatcher::Outcome Dispatcher::execute(ConnId conn, std::span<const std::string_view> args,
                                        Time now, std::string& reply) {
  if (args.empty()) return Outcome::replied;
  ++stats_.commands;
  auto cit = connections_.find(conn);
  if (cit == connections_.end()) {
    resp::error(reply, "ERR", "unknown connection");
    return Outcome::close;
  }
  Connection& c = cit->second;
  const std::string cmd = upper(args[0]);
  try {
    // A waits connection answers everything but QUIT under a tag (dispatcher_waits.cc).
    if (c.waits && cmd != "QUIT") return tagged(c, conn, cmd, args, now, reply);
    if (cmd == "AUTH") return auth(c, conn, args, reply);
    if (cmd == "QUIT") {
      resp::simple(reply, "OK");
      return Outcome::close;
    }
    if (!c.authenticated) throw Reject{"NOAUTH", "authentication required"};
    authorize(c, cmd, args);
    if (c.watching && cmd != "PING") {
      throw Reject{"ERR", "a watching connection takes only PING and QUIT"};
    }
    if (c.listening && cmd != "PING") {
      throw Reject{"ERR", "a listening connection takes only PING and QUIT"};
    }

    if (cmd == "PING") {
      arity(args, 1, 2);
      if (args.size() == 2) {
        resp::bulk(reply, args[1]);
      } else {
        resp::simple(reply, "PONG");
      }
      return Outcome::replied;
    }
    if (cmd == "ACQUIRE") {
      const Outcome outcome = acquire(c, conn, args, now, reply);
      if (outcome == Outcome::replied && args.size() > 1) touched(args[1]);
      return outcome;
    }
    if (cmd == "ACQUIRESET") {
      const Outcome outcome = acquire_set(c, conn, args, now, reply);
      if (outcome == Outcome::replied && !watchers_.empty()) {
        for (std::size_t i = 3; i < args.size(); i += 2) touched(args[i]);
      }
      return outcome;
    }
    if (cmd == "WATCH") {
      watch(c, conn, args, reply);
      return Outcome::replied;
    }
    if (cmd == "REVOKES") {
      listen(c, conn, args, reply);
      return Outcome::replied;
    }
    if (cmd == "WAITS") {
      start_waits(c, args, reply);
      return Outcome::replied;
    }
    if (cmd == "RENEW") {
      arity(args, 5, 5);
      const auto key = parse_key(args[1]);
      const auto token = parse_u64(args[2], "token");
      const Secret secret = parse_secret(args[3]);
      const auto ttl = parse_ms(args[4], "ttl", kMinTtlMs, kMaxTtlMs);
      // A stranger's RENEW is "not held" and changes nothing, not even the clock.
      bool ok = false;
      if (owns(key, token, secret)) {
        // The renewed lease, and the lock-delay after it, must fit in the restart embargo.
        if (const auto grant = table_.find(key, token)) guard_->note_hold(ttl + grant->lock_delay);
        ok = table_.renew(key, token, ttl, now).has_value();
        collect(now);
      }
      resp::integer(reply, ok ? 1 : 0);
      return Outcome::replied;
    }
    if (cmd == "RELEASE") {
      arity(args, 4, 4);
      const auto key = parse_key(args[1]);
      const auto token = parse_u64(args[2], "token");
      const Secret secret = parse_secret(args[3]);
      bool ok = false;
      if (owns(key, token, secret)) {
        const auto id = table_.find(key, token)->id;
        ok = table_.release(key, token, now);
        // Released, or expired while applying `now` (collect drops that one's secret).
        if (ok) {
          restored_secrets_.erase(id);
          cached_.erase(id);
          touched(key);
        }
        collect(now);
      }
      resp::integer(reply, ok ? 1 : 0);
      return Outcome::replied;
    }
    if (cmd == "PROCLAIM") {
      arity(args, 5, 5);
      const auto key = parse_key(args[1]);
      const auto token = parse_u64(args[2], "token");
      const Secret secret = parse_secret(args[3]);
      const auto value = parse_leader_value(args[4]);
      table_.advance(now);
      collect(now);
      // Only the grant's owner changes its value; anyone else gets "not held".
      const bool ok = owns(key, token, secret) && table_.set_value(key, token, std::string(value));
      if (ok) touched(key);
      resp::integer(reply, ok ? 1 : 0);
      return Outcome::replied;
    }
    if (cmd == "CHECK") {
      arity(args, 4, 4);
      const auto key = parse_key(args[1]);
      const Mode mode = parse_mode(args[2]);
      const auto token = parse_u64(args[3], "token");
      table_.advance(now);
      collect(now);
      const auto grant = table_.find(key, token);
      resp::integer(reply, grant && grant->mode == mode ? 1 : 0);
      return Outcome::replied;
    }
    if (cmd == "INSPECT") {
      arity(args, 2, 2);
      const auto key = parse_key(args[1]);
      table_.advance(now);
      collect(now);
      inspect(key, now, reply);
      return Outcome::replied;
    }
    if (cmd == "LIST") {
      list(args, now, reply);
      return Outcome::replied;
    }
    if (cmd == "INFO") {
      arity(args, 1, 2);
      table_.advance(now);
      collect(now);
      info(now, reply);
      return Outcome::replied;
    }
    if (cmd == "HELLO") {
      resp::array(reply, 8);
      resp::bulk(reply, "server");
      resp::bulk(reply, "wardend");
      resp::bulk(reply, "version");
      resp::bulk(reply, config_.version);
      resp::bulk(reply, "proto");
      // 2: grants carry owner secrets (ACQUIRE replies with one, RENEW/RELEASE need it).
      // 3: ACQUIRE ... PERMITS k n (semaphores).
      // 4: ACQUIRESET (multi-locks granted in one step).
      // 5: ACQUIRE ... VALUE v, PROCLAIM, INSPECT "values" (elections).
      // 6: WATCH (pushed changes of a key's holders).
      // 7: REVOKES and ACQUIRE … CACHE (lock caching).
      // 8: WAITS, ACQUIRE … TAG, WITHDRAW (many waiting acquires on one connection).
      resp::integer(reply, 8);
      resp::bulk(reply, "capabilities");
      resp::bulk(reply,
                 "shared fair unfair lock-delay fencing durable-tokens check semaphore multi "
                 "election watch cache waits");
      return Outcome::replied;
    }
    throw Reject{"ERR", "unknown command '" + std::string(args[0].substr(0, 64)) + "'"};
  } catch (const Reject& r) {
    ++stats_.errors;
    resp::error(reply, r.code, r.message);
    return Outcome::replied;
  } catch (const Error& e) {
    // A durability failure (the state file could not be written): nothing was granted.
    ++stats_.errors;
    resp::error(reply, "ERR", e.what());
    return Outcome::replied;
  }
}

Dispatcher::Outcome Dispatcher::auth(Connection& c, ConnId conn,
                                     std::span<const std::string_view> args, std::string& reply) {
  arity(args, 2, 3);
  // AUTH password, or AUTH user password as Redis 6 clients send it. Without a users
  // file the user is ignored (as before users existed); with one, `default` (or no
  // user) is the --requirepass user and any other name is looked up.
  const bool named = config_.users && args.size() == 3 && args[1] != "default";
  if (!named) {
    if (config_.password.empty()) {
      if (config_.users) throw Reject{"WRONGPASS", "invalid user name or password"};
      throw Reject{"ERR", "no password is set on this server"};
    }
    if (!password_matches(args.back(), config_.password)) {
      throw Reject{"WRONGPASS", "invalid password"};
    }
    c.authenticated = true;
    c.user.clear();
    resp::simple(reply, "OK");
    return Outcome::replied;
  }
  if (pending_auth_.size() >= config_.limits.max_pending_auth) {
    throw Reject{"LIMIT", "too many AUTH checks in progress; retry later"};
  }
  const User* user = config_.users->find(args[1]);
  const std::uint64_t id = ++next_auth_id_;
  pending_auth_[id] = PendingAuth{conn, user ? user->name : std::string()};
  auth_checks_.push_back(
      AuthCheck{id, user ? user->hash : config_.users->decoy_hash(), std::string(args[2])});
  c.auth = id;
  return Outcome::parked;
}

void Dispatcher::authorize(Connection& c, const std::string& cmd,
                           std::span<const std::string_view> args) {
  if (c.user.empty()) return;  // the default user: every right on every group
  const User* user = config_.users ? config_.users->find(c.user) : nullptr;
  if (user == nullptr) {
    const std::string name = c.user;
    c.authenticated = false;
    c.user.clear();
    throw Reject{"NOAUTH", "user '" + name + "' no longer exists; authenticate again"};
  }
  const Rights needed = required_right(cmd);
  if (needed == 0) return;
  if (!has_right(user->rights, needed)) {
    throw Reject{"NOPERM", "user '" + user->name + "' has no " + std::string(right_name(needed)) +
                               " right for " + cmd};
  }
  if (cmd == "ACQUIRESET") {
    // ACQUIRESET ttl n key1 mode1 ...: every key's group. Malformed ones are left to the
    // command, which rejects them with INVALID or ERR.
    for (std::size_t i = 3; i < args.size(); i += 2) authorize_group(*user, args[i], true);
    return;
  }
  if (cmd == "INFO" || cmd == "REVOKES" || args.size() < 2) return;  // they name no group
  // LIST names the group; the others a key group/name.
  authorize_group(*user, args[1], cmd != "LIST");
}

void Dispatcher::set_users(std::shared_ptr<const UserTable> users) {
  config_.users = std::move(users);
}

std::vector<Dispatcher::AuthCheck> Dispatcher::take_auth_checks() {
  std::vector<AuthCheck> out;
  out.swap(auth_checks_);
  return out;
}

void Dispatcher::auth_checked(std::uint64_t id, bool matched) {
  const auto it = pending_auth_.find(id);
  if (it == pending_auth_.end()) return;
  const PendingAuth pending = std::move(it->second);
  pending_auth_.erase(it);
  const auto cit = connections_.find(pending.conn);
  if (cit == connections_.end()) return;
  Connection& c = cit->second;
  c.auth.reset();
  Wakeup w{pending.conn, {}};
  // A decoy check (unknown name) never succeeds, whatever it answered. A failed AUTH
  // leaves the connection as it was, as in Redis.
  if (matched && !pending.user.empty()) {
    c.authenticated = true;
    c.user = pending.user;
    resp::simple(w.reply, "OK");
  } else {
    ++stats_.errors;
    resp::error(w.reply, "WRONGPASS", "invalid user name or password");
  }
  wakeups_.push_back(std::move(w));
}

Dispatcher::Outcome Dispatcher::acquire(Connection& c, ConnId conn,
                                        std::span<const std::string_view> args, Time now,
                                        std::string& reply, const std::string* tag) {
  if (args.size() < 4) arity(args, 4, 4);
  table::Request request;
  request.key = std::string(parse_key(args[1]));
  request.mode = parse_mode(args[2]);
  request.ttl = parse_ms(args[3], "ttl", kMinTtlMs, kMaxTtlMs);
  request.session = conn;
  WaitOptions wait;
  bool campaign = false;
  std::optional<ConnId> cache_by;
  for (std::size_t i = 4; i < args.size(); ++i) {
    if (parse_wait_option(args, i, now, wait)) continue;
    if (upper(args[i]) == "CACHE" && i + 1 < args.size()) {
      // Lock caching: the listener to push this grant's revoke to.
      cache_by = parse_u64(args[++i], "cache");
    } else if (upper(args[i]) == "PERMITS" && i + 2 < args.size()) {
      // A semaphore's request: k of its n permits, as a shared grant.
      request.permits =
          static_cast<std::uint32_t>(parse_bounded(args[++i], "permits", 1, core::kMaxPermits));
      request.capacity =
          static_cast<std::uint32_t>(parse_bounded(args[++i], "of", 1, core::kMaxPermits));
      if (request.permits > request.capacity) {
        throw Reject{"INVALID", "permits " + std::to_string(request.permits) +
                                    " are more than the semaphore's " +
                                    std::to_string(request.capacity)};
      }
    } else if (upper(args[i]) == "VALUE" && i + 1 < args.size()) {
      // An election's campaign: the candidate's value rides on the grant.
      request.value = std::string(parse_leader_value(args[++i]));
      campaign = true;
    } else {
      unknown_option("ACQUIRE", args[i]);
    }
  }
  request.deadline = wait.deadline;
  request.fair = wait.fair;
  request.lock_delay = wait.lock_delay;

  if (cache_by && (request.capacity > 0 || campaign)) {
    throw Reject{"INVALID", "a cached grant is a lock's (not with PERMITS or VALUE)"};
  }
  if (cache_by) {
    // Only a listener of the caller's own user: another user's listener must not be told
    // of grants it has no right to know of, nor hold them back. An id that is no listener
    // (any more: it may have just closed) makes an ordinary grant, as before.
    const auto listener = connections_.find(*cache_by);
    if (listener != connections_.end() && listener->second.listening &&
        listener->second.user != c.user) {
      throw Reject{"NOPERM", "CACHE " + std::to_string(*cache_by) +
                                 " is the revoke listener of another user"};
    }
  }
  if (request.capacity > 0 && request.mode != Mode::shared) {
    throw Reject{"INVALID", "a semaphore's request (PERMITS) is shared"};
  }
  if (!request.value.empty() && (request.mode != Mode::exclusive || request.capacity > 0)) {
    throw Reject{"INVALID", "a campaign (VALUE) is an exclusive lock's request"};
  }
  // The limits count what is there now: leases and waits that ran out are gone first.
  prepare_grant(request.ttl + request.lock_delay, now);
  const auto stats = table_.stats();
  const bool waits = request.deadline > now;
  if (stats.keys >= config_.limits.max_keys && table_.inspect(request.key).holders.empty() &&
      table_.inspect(request.key).waiters.empty()) {
    throw Reject{"LIMIT", "the server holds the maximum number of keys"};
  }
  if (waits && table_.inspect(request.key).waiters.size() >= config_.limits.max_waiters_per_key) {
    throw Reject{"LIMIT", "too many waiters on this key"};
  }
  const auto result = table_.acquire(request, now);
  collect(now);
  switch (result.status) {
    case table::AcquireStatus::granted:
      ++stats_.grants;
      // Only a request that barged (UNFAIR) can be granted past a queue.
      if (cache_by) {
        cache_grant(result.grant, *cache_by,
                    !request.fair && !table_.inspect(request.key).waiters.empty());
      }
      grant_reply(reply, result.grant.token, secret_of(result.grant), now, now);
      return Outcome::replied;
    case table::AcquireStatus::busy:
      revoke_holders(request.key);
      resp::nil(reply);
      return Outcome::replied;
    case table::AcquireStatus::mismatch:
      throw Reject{"INVALID", "the key is a semaphore of another number of permits, or not one"};
    case table::AcquireStatus::queued:
      revoke_holders(request.key);
      if (tag != nullptr) {
        c.tagged[*tag] = result.id;
        parked_[result.id] = Parked{conn, now, cache_by, *tag};
      } else {
        c.parked = result.id;
        parked_[result.id] = Parked{conn, now, cache_by};
      }
      return Outcome::parked;
  }
  return Outcome::replied;
}

void Dispatcher::prepare_grant(milliseconds ttl_plus_delay, Time now) {
  if (const auto left = guard_->embargo_ms(now); left > 0) {
    throw Reject{"STARTING",
                 "restarted recently; no grants for another " + std::to_string(left) + " ms"};
  }
  table_.advance(now);
  collect(now);
  guard_->note_hold(ttl_plus_delay);
}

Dispatcher::Outcome Dispatcher::acquire_set(Connection& c, ConnId conn,
                                            std::span<const std::string_view> args, Time now,
                                            std::string& reply) {
  // ACQUIRESET ttl n key1 mode1 ... keyn moden [options]
  if (args.size() < 5) arity(args, 5, 5);
  table::SetRequest request;
  request.ttl = parse_ms(args[1], "ttl", kMinTtlMs, kMaxTtlMs);
  const std::size_t n = parse_bounded(args[2], "members", 1, core::kMaxMultiMembers);
  if (args.size() < 3 + 2 * n) arity(args, 3 + 2 * n, 3 + 2 * n);
  request.members.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    request.members.push_back(
        {std::string(parse_key(args[3 + 2 * i])), parse_mode(args[4 + 2 * i])});
  }
  WaitOptions wait;
  for (std::size_t i = 3 + 2 * n; i < args.size(); ++i) {
    if (!parse_wait_option(args, i, now, wait)) unknown_option("ACQUIRESET", args[i]);
  }
  request.deadline = wait.deadline;
  request.fair = wait.fair;
  request.lock_delay = wait.lock_delay;
  request.session = conn;

  prepare_grant(request.ttl + request.lock_delay, now);
  const bool waits = request.deadline > now;
  std::size_t new_keys = 0;
  for (const auto& member : request.members) {
    const auto info = table_.inspect(member.key);
    if (info.holders.empty() && info.waiters.empty()) ++new_keys;
    if (waits && info.waiters.size() >= config_.limits.max_waiters_per_key) {
      throw Reject{"LIMIT", "too many waiters on key " + member.key};
    }
  }
  if (new_keys > 0 && table_.stats().keys + new_keys > config_.limits.max_keys) {
    throw Reject{"LIMIT", "the server holds the maximum number of keys"};
  }
  const auto result = table_.acquire_set(request, now);
  collect(now);
  switch (result.status) {
    case table::AcquireStatus::granted:
      stats_.grants += n;
      resp::array(reply, static_cast<std::int64_t>(n));
      for (std::size_t i = 0; i < n; ++i) {
        grant_reply(reply, result.grants[i].token, secret_of(result.grants[i]), now, now);
      }
      return Outcome::replied;
    case table::AcquireStatus::busy:
      for (const auto& member : request.members) revoke_holders(member.key);
      resp::nil(reply);
      return Outcome::replied;
    case table::AcquireStatus::mismatch:
      throw Reject{"INVALID", "a set names one key twice, or a semaphore's key"};
    case table::AcquireStatus::queued:
      for (const auto& member : request.members) revoke_holders(member.key);
      c.parked = result.id;
      parked_[result.id] = Parked{conn, now};
      return Outcome::parked;
  }
  return Outcome::replied;
}

void Dispatcher::advance(Time now) {
  retry_at_.reset();
  survive(now, [&] {
    table_.advance(now);
    collect(now);
  });
}

void Dispatcher::survive(Time now, const std::function<void()>& call) {
  try {
    call();
  } catch (const Error&) {
    ++stats_.errors;
    retry_at_ = now + std::chrono::milliseconds(100);
  }
}

bool Dispatcher::owns(std::string_view key, std::uint64_t token, const Secret& secret) const {
  const auto grant = table_.find(key, token);
  // Computed and compared when there is no grant too, so both answers cost the same.
  const Secret expected = grant ? secret_of(*grant) : owner_secrets_.of(key, token);
  const bool same = CRYPTO_memcmp(expected.data(), secret.data(), secret.size()) == 0;
  return grant.has_value() && same;
}

Dispatcher::Secret Dispatcher::secret_of(const table::Grant& grant) const {
  if (!restored_secrets_.empty()) {
    if (const auto it = restored_secrets_.find(grant.id); it != restored_secrets_.end()) {
      return it->second;
    }
  }
  return owner_secrets_.of(grant.key, grant.token);
}

std::optional<Time> Dispatcher::next_wakeup() const {
  auto next = table_.next_wakeup();
  if (retry_at_ && (!next || *retry_at_ < *next)) next = retry_at_;
  return next;
}

void Dispatcher::collect(Time now) {
  // Giving a grant back (below) can grant the next waiter: another event. Take events
  // until there are none, so that no grant waits for an unrelated call to be announced.
  for (auto events = table_.take_events(); !events.empty(); events = table_.take_events()) {
    for (const auto& event : events) {
      if (event.kind != table::Event::Kind::timed_out) {
        touched(event.grant.key);
        for (const auto& member : event.grants) touched(member.key);
      }
      if (event.kind == table::Event::Kind::expired) {
        ++stats_.expirations;
        restored_secrets_.erase(event.grant.id);
        cached_.erase(event.grant.id);
        continue;
      }
      auto it = parked_.find(event.grant.id);
      if (it == parked_.end()) {
        // Granted to a waiter whose connection is gone: disconnect() forgets the waiter
        // first, and the table may grant it while applying the time up to that call.
        // Give the grant back rather than leave a lock nobody holds.
        if (event.kind == table::Event::Kind::granted) {
          cached_.erase(event.grant.id);
          table_.release(event.grant.key, event.grant.token, now);
        }
        for (const auto& member : event.grants) table_.release(member.key, member.token, now);
        continue;
      }
      const Parked p = it->second;
      parked_.erase(it);
      if (auto cit = connections_.find(p.conn); cit != connections_.end()) {
        if (p.tag.empty()) {
          cit->second.parked.reset();
        } else {
          cit->second.tagged.erase(p.tag);
        }
      }
      Wakeup w{p.conn, {}};
      if (!p.tag.empty()) {  // a tagged request's answer: [tag, reply]
        resp::array(w.reply, 2);
        resp::bulk(w.reply, p.tag);
      }
      if (event.kind == table::Event::Kind::granted) {
        ++stats_.grants;
        grant_reply(w.reply, event.grant.token, secret_of(event.grant), p.received, now);
      } else if (event.kind == table::Event::Kind::set_granted) {
        stats_.grants += event.grants.size();
        resp::array(w.reply, static_cast<std::int64_t>(event.grants.size()));
        for (std::size_t i = 0; i < event.grants.size(); ++i) {
          grant_reply(w.reply, event.grants[i].token, secret_of(event.grants[i]), p.received, now);
        }
      } else {
        ++stats_.timeouts;
        resp::nil(w.reply);
      }
      wakeups_.push_back(std::move(w));
      // After the grant's reply, so that its revoke never comes before it.
      if (p.cache && event.kind == table::Event::Kind::granted) {
        cache_grant(event.grant, *p.cache, !table_.inspect(event.grant.key).waiters.empty());
      }
    }
  }
}

std::vector<Dispatcher::Wakeup> Dispatcher::take_wakeups() {
  std::vector<Wakeup> out;
  out.swap(wakeups_);
  pushed_.clear();
  return out;
}

void Dispatcher::watch(Connection& c, ConnId conn, std::span<const std::string_view> args,
                       std::string& reply) {
  arity(args, 2, 2);
  const std::string key(parse_key(args[1]));
  c.watching = key;
  watchers_[key].push_back(conn);
  resp::simple(reply, "OK");
}

void Dispatcher::listen(Connection& c, ConnId conn, std::span<const std::string_view> args,
                        std::string& reply) {
  arity(args, 1, 1);
  c.listening = true;
  resp::integer(reply, static_cast<std::int64_t>(conn));
}

void Dispatcher::cache_grant(const table::Grant& grant, ConnId listener, bool queued) {
  const auto it = connections_.find(listener);
  if (it == connections_.end() || !it->second.listening) return;  // an ordinary grant
  const auto entry = cached_.emplace(grant.id, listener).first;
  if (queued) revoke(entry, grant.key, grant.token);
}

void Dispatcher::revoke_holders(std::string_view key) {
  if (cached_.empty()) return;  // the common case: nothing is cached anywhere
  const table::KeyInfo info = table_.inspect(key);
  for (const auto& holder : info.holders) {
    const auto it = cached_.find(holder.id);
    if (it != cached_.end()) revoke(it, key, holder.token);
  }
}

void Dispatcher::revoke(std::unordered_map<table::RequestId, ConnId>::iterator it,
                        std::string_view key, std::uint64_t token) {
  const ConnId listener = it->second;
  cached_.erase(it);
  const auto cit = connections_.find(listener);
  if (cit == connections_.end() || !cit->second.listening) return;  // nobody to tell
  Wakeup w{listener, {}};
  resp::array(w.reply, 3);
  resp::bulk(w.reply, "REVOKE");
  resp::bulk(w.reply, key);
  resp::integer(w.reply, static_cast<std::int64_t>(token));
  wakeups_.push_back(std::move(w));
}

void Dispatcher::touched(std::string_view key) {
  if (watchers_.empty()) return;  // the common case: nobody watches anything
  const auto it = watchers_.find(std::string(key));
  if (it == watchers_.end()) return;
  for (const ConnId conn : it->second) {
    // One CHANGED per watcher between two takes: the watcher reads the key anew anyway.
    if (!pushed_.insert(conn).second) continue;
    Wakeup w{conn, {}};
    resp::array(w.reply, 2);
    resp::bulk(w.reply, "CHANGED");
    resp::bulk(w.reply, key);
    wakeups_.push_back(std::move(w));
  }
}

DispatcherStats Dispatcher::stats() const {
  DispatcherStats s = stats_;
  s.connections = connections_.size();
  s.cached = cached_.size();
  s.parked = parked_.size();
  s.table = table_.stats();
  return s;
}

void Dispatcher::info(Time now, std::string& reply) const {
  const auto s = stats();
  std::string text;
  text += "server:wardend\r\nversion:" + config_.version + "\r\n";
  text += "connections:" + std::to_string(s.connections) + "\r\n";
  text += "keys:" + std::to_string(s.table.keys) + "\r\n";
  text += "holders:" + std::to_string(s.table.holders) + "\r\n";
  text += "waiters:" + std::to_string(s.table.waiters) + "\r\n";
  text += "commands:" + std::to_string(s.commands) + "\r\n";
  text += "grants:" + std::to_string(s.grants) + "\r\n";
  text += "timeouts:" + std::to_string(s.timeouts) + "\r\n";
  text += "expirations:" + std::to_string(s.expirations) + "\r\n";
  text += "errors:" + std::to_string(s.errors) + "\r\n";
  text += "last_token:" + std::to_string(tokens_->last()) + "\r\n";
  text +=
      "uptime_ms:" + std::to_string(std::max<std::int64_t>(0, ms_between(config_.started, now))) +
      "\r\n";
  text += "rss_bytes:" + std::to_string(rss_bytes()) + "\r\n";
  if (config_.extra_info) text += config_.extra_info();
  resp::bulk(reply, text);
}

void Dispatcher::inspect(std::string_view key, Time now, std::string& reply) const {
  const auto info = table_.inspect(key);
  // A semaphore's reply adds its permits to each row and a "permits" label at the end;
  // a lock's is as it was before semaphores.
  const bool semaphore = info.capacity > 0;
  // A leader's value comes as a "values" label with one value per holder row.
  const bool values = std::any_of(info.holders.begin(), info.holders.end(),
                                  [](const table::HolderInfo& h) { return !h.value.empty(); });
  resp::array(reply, (semaphore ? 8 : 6) + (values ? 2 : 0));
  resp::bulk(reply, "holders");
  resp::array(reply, info.holders.size());
  for (const auto& h : info.holders) {
    resp::array(reply, semaphore ? 4 : 3);
    resp::bulk(reply, to_string(h.mode));
    resp::integer(reply, static_cast<std::int64_t>(h.token));
    resp::integer(reply, std::max<std::int64_t>(0, ms_between(now, h.expires)));
    if (semaphore) resp::integer(reply, h.permits);
  }
  resp::bulk(reply, "waiters");
  resp::array(reply, info.waiters.size());
  for (const auto& w : info.waiters) {
    resp::array(reply, semaphore ? 3 : 2);
    resp::bulk(reply, to_string(w.mode));
    resp::integer(reply, w.deadline == Time::max() ? -1 : ms_between(now, w.deadline));
    if (semaphore) resp::integer(reply, w.permits);
  }
  resp::bulk(reply, "delayed_ms");
  resp::integer(reply, info.delayed_until
                           ? std::max<std::int64_t>(0, ms_between(now, *info.delayed_until))
                           : 0);
  if (semaphore) {
    resp::bulk(reply, "permits");
    resp::integer(reply, info.capacity);
  }
  if (values) {
    resp::bulk(reply, "values");
    resp::array(reply, info.holders.size());
    for (const auto& h : info.holders) resp::bulk(reply, h.value);
  }
}

// LIST group [cursor] [COUNT n]: one page of the group's locks after `cursor` (the last
// name of the previous page; "" or absent: the first page).
void Dispatcher::list(std::span<const std::string_view> args, Time now, std::string& reply) {
  arity(args, 2, 5);
  const std::string_view group = args[1];
  try {
    core::validate_group(group);
  } catch (const Error& e) {
    throw Reject{"INVALID", e.what()};
  }
  std::string_view cursor;
  std::size_t count = kListPage;
  std::size_t i = 2;
  if (args.size() == 3 || args.size() == 5) cursor = args[i++];
  if (i < args.size()) {
    if (args.size() - i != 2 || upper(args[i]) != "COUNT") {
      throw Reject{"ERR", "syntax error: LIST group [cursor] [COUNT n]"};
    }
    const std::uint64_t n = parse_u64(args[i + 1], "count");
    if (n < 1 || n > kListPage) {
      throw Reject{"INVALID", "count must be 1.." + std::to_string(kListPage)};
    }
    count = static_cast<std::size_t>(n);
  }
  if (!cursor.empty()) {
    try {
      core::validate_name(cursor);
    } catch (const Error& e) {
      throw Reject{"INVALID", std::string("cursor: ") + e.what()};
    }
  }
  table_.advance(now);
  collect(now);
  const std::string prefix = std::string(group) + '/';
  // Every key of the group sorts after the bare prefix (names are never empty).
  const std::string after = prefix + std::string(cursor);
  const auto page = table_.list(prefix, after, count);
  resp::array(reply, 2);
  // A full page may have more after it; a short one is the last ("" ends the listing).
  resp::bulk(reply, page.size() == count ? std::string_view(page.back().key).substr(prefix.size())
                                         : std::string_view());
  resp::array(reply, page.size());
  for (const auto& k : page) {
    resp::array(reply, 3);
    resp::bulk(reply, std::string_view(k.key).substr(prefix.size()));
    resp::integer(reply, static_cast<std::int64_t>(k.holders));
    resp::integer(reply, static_cast<std::int64_t>(k.waiters));
  }
}

}  // namespace warden::server

// support/redis_masters.h — N independent redis-server masters for the redlock://
// engine's tests: each a RedisServer of its own (temp dir, free port), all with the same
// RedisOptions, stopped by PID on destruction.
//
// The helpers read and delete a lock's keys behind the engine's back on every master
// that is *up*: running, and not stopped with SIGSTOP (read from /proc/PID/stat). A
// master that is down is skipped, never waited for. A master that is up but does not
// answer within a second makes the helper throw std::runtime_error, so a test never
// mistakes a silent master for an empty one. Not thread-safe: one thread (the test's,
// or a nemesis that owns the servers while it runs) uses it at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/redis_server.h"

namespace warden::testing {

// The hash tag every key the redlock:// engine keeps for the lock (group, name) starts
// with: "{warden:GROUP/NAME}", then ":rl" (the grant: the owner's value, with a PX
// expiry of the TTL) or ":rf" (the lock's fence counter, which expires a TTL after the
// grant's last write or renewal).
inline std::string redlock_tag(std::string_view group, std::string_view name) {
  return lock_tag(group, name);  // the same tag as redis://
}
inline std::string grant_key(std::string_view group, std::string_view name) {
  return redlock_tag(group, name) + ":rl";
}
inline std::string fence_key(std::string_view group, std::string_view name) {
  return redlock_tag(group, name) + ":rf";
}

// One master's view of a key.
struct MasterKey {
  int master = 0;
  std::optional<std::string> value;  // nullopt: no such key
  long long pttl = -2;               // PTTL: ms left, -1 no expiry, -2 no key
};

class RedisMasters {
 public:
  // Starts `count` masters (1..16); throws std::runtime_error if one does not come up.
  explicit RedisMasters(int count, RedisOptions options = {});
  ~RedisMasters();  // kills every master (RedisServer's destructor)
  RedisMasters(const RedisMasters&) = delete;
  RedisMasters& operator=(const RedisMasters&) = delete;

  int size() const { return static_cast<int>(servers_.size()); }
  int quorum() const { return size() / 2 + 1; }
  RedisServer& server(int i) { return *servers_.at(static_cast<std::size_t>(i)); }
  const RedisServer& server(int i) const { return *servers_.at(static_cast<std::size_t>(i)); }

  // "redlock://[AUTH@]127.0.0.1:P1,...,127.0.0.1:PN[?QUERY]": AUTH is "USER:PASSWORD"
  // for an ACL user, ":PASSWORD" for a password alone (as RedisServer::uri()).
  std::string uri(std::string_view query = "") const;
  // The same masters in the order given (a subset, or repeated for a bad URI).
  std::string uri_of(const std::vector<int>& masters, std::string_view query = "") const;

  // Master i is running and not stopped (SIGSTOP).
  bool up(int i);
  // The masters that are up.
  std::vector<int> up_masters();

  // `key` on every master that is up, in master order (down masters left out).
  std::vector<MasterKey> read(const std::string& key, int db = 0);
  // The up masters on which the lock's grant key (":rl") exists.
  std::vector<int> holding(std::string_view group, std::string_view name, int db = 0);
  // The lock's fence counter (":rf") on each up master; nullopt where it is absent.
  std::vector<std::optional<std::uint64_t>> fences(std::string_view group, std::string_view name,
                                                   int db = 0);
  // Every grant key (name ending ":rl" and holding "{warden:") on the up masters, as
  // "mI KEY", sorted: what the engine left behind.
  std::vector<std::string> grant_keys(int db = 0);
  // Every key of the lock (any name that starts with its hash tag: ":rl", ":rf",
  // ":rx:OWNER", and the redis:// engine's keys) on the up masters, as "mI KEY", sorted:
  // read with SCAN over each master's whole keyspace.
  std::vector<std::string> lock_keys(std::string_view group, std::string_view name, int db = 0);
  // Deletes the lock's grant key on every up master, as an operator or an eviction
  // could; returns how many masters had one.
  int drop(std::string_view group, std::string_view name, int db = 0);
  // Sets the lock's grant key to `value` (PX `ttl`) on the masters given, as if another
  // owner held it there.
  void plant(std::string_view group, std::string_view name, const std::vector<int>& masters,
             const std::string& value, std::chrono::milliseconds ttl, int db = 0);
  // Runs one command on master i (which must be up); the reply as RedisProbe gives it.
  std::string command(int i, const std::vector<std::string>& args, int db = 0);

 private:
  // "mN KEY" for every key of db on every master that is up and for which `wanted` holds,
  // sorted.
  std::vector<std::string> keys_where(int db,
                                      const std::function<bool(const std::string&)>& wanted);
  // A probe of master i, made on first use; nullptr if it cannot be reached.
  RedisProbe* probe(int i);
  void forget_probe(int i);

  std::vector<std::unique_ptr<RedisServer>> servers_;
  std::vector<std::unique_ptr<RedisProbe>> probes_;
};

// The keys left behind, for a failure message.
std::string describe_keys(const std::vector<std::string>& keys);

}  // namespace warden::testing

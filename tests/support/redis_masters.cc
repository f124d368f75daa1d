#include "support/redis_masters.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>

namespace warden::testing {
namespace {

using namespace std::chrono_literals;

// How long a probe waits for a master that is up (a reply, or a connect).
constexpr std::chrono::milliseconds kProbeTimeout = 1s;

// The state letter of /proc/PID/stat ('R', 'S', 'T' for stopped, ...); '?' if unknown.
char process_state(pid_t pid) {
  const std::string stat = read_proc_file("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');  // the command name may hold spaces and ')'
  if (close == std::string::npos || close + 2 >= stat.size()) return '?';
  return stat[close + 2];
}

std::string credentials(const RedisOptions& o) {
  if (o.acl_user) return *o.acl_user + ":" + o.acl_password.value_or("") + "@";
  if (o.password) return ":" + *o.password + "@";
  return {};
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix.data(), suffix.size()) == 0;
}

}  // namespace

RedisMasters::RedisMasters(int count, RedisOptions options) {
  if (count < 1 || count > 16) throw std::runtime_error("RedisMasters: 1..16 masters");
  for (int i = 0; i < count; ++i) {
    servers_.push_back(std::make_unique<RedisServer>(options));
    probes_.emplace_back();
  }
}

RedisMasters::~RedisMasters() {
  probes_.clear();
  servers_.clear();
}

std::string RedisMasters::uri(std::string_view query) const {
  std::vector<int> all;
  for (int i = 0; i < size(); ++i) all.push_back(i);
  return uri_of(all, query);
}

std::string RedisMasters::uri_of(const std::vector<int>& masters, std::string_view query) const {
  std::string text = "redlock://" + credentials(servers_.front()->options());
  for (std::size_t k = 0; k < masters.size(); ++k) {
    if (k > 0) text += ',';
    text += "127.0.0.1:" + std::to_string(server(masters[k]).port());
  }
  if (!query.empty()) {
    text += '?';
    text += query;
  }
  return text;
}

bool RedisMasters::up(int i) {
  RedisServer& s = server(i);
  if (!s.running()) return false;
  const char state = process_state(s.process().pid());
  return state != 'T' && state != 't';
}

std::vector<int> RedisMasters::up_masters() {
  std::vector<int> masters;
  for (int i = 0; i < size(); ++i) {
    if (up(i)) masters.push_back(i);
  }
  return masters;
}

RedisProbe* RedisMasters::probe(int i) {
  auto& slot = probes_.at(static_cast<std::size_t>(i));
  if (!slot) slot = std::make_unique<RedisProbe>(server(i), kProbeTimeout);
  return slot.get();
}

void RedisMasters::forget_probe(int i) { probes_.at(static_cast<std::size_t>(i)).reset(); }

std::string RedisMasters::command(int i, const std::vector<std::string>& args, int db) {
  try {
    RedisProbe* p = probe(i);
    if (db == 0) return p->command(args);
    p->command({"SELECT", std::to_string(db)});
    std::string reply = p->command(args);
    p->command({"SELECT", "0"});
    return reply;
  } catch (const std::runtime_error&) {
    forget_probe(i);  // a timed-out connection may still deliver the late reply
    throw;
  }
}

std::vector<MasterKey> RedisMasters::read(const std::string& key, int db) {
  std::vector<MasterKey> seen;
  for (int i = 0; i < size(); ++i) {
    if (!up(i)) continue;
    MasterKey entry;
    entry.master = i;
    try {
      // One round trip for both, so the value and its expiry belong together.
      const std::string reply = command(i,
                                        {"EVAL",
                                         "return {redis.call('EXISTS', KEYS[1]), "
                                         "tostring(redis.call('GET', KEYS[1])), "
                                         "redis.call('PTTL', KEYS[1])}",
                                         "1", key},
                                        db);
      // "EXISTS\nVALUE\nPTTL"; VALUE may itself hold '\n', so split at the ends.
      const auto first = reply.find('\n');
      const auto last = reply.rfind('\n');
      if (first == std::string::npos || last == first) {
        throw std::runtime_error("redis masters: unexpected reply " + reply);
      }
      if (reply.substr(0, first) == "1") {
        entry.value = reply.substr(first + 1, last - first - 1);
      }
      entry.pttl = std::stoll(reply.substr(last + 1));
    } catch (const std::runtime_error&) {
      if (!up(i)) continue;  // stopped or killed a moment ago
      throw;
    }
    seen.push_back(std::move(entry));
  }
  return seen;
}

std::vector<int> RedisMasters::holding(std::string_view group, std::string_view name, int db) {
  std::vector<int> masters;
  for (const auto& k : read(grant_key(group, name), db)) {
    if (k.value) masters.push_back(k.master);
  }
  return masters;
}

std::vector<std::optional<std::uint64_t>> RedisMasters::fences(std::string_view group,
                                                               std::string_view name, int db) {
  std::vector<std::optional<std::uint64_t>> values;
  for (const auto& k : read(fence_key(group, name), db)) {
    if (k.value) {
      values.push_back(std::stoull(*k.value));
    } else {
      values.push_back(std::nullopt);
    }
  }
  return values;
}

std::vector<std::string> RedisMasters::keys_where(
    int db, const std::function<bool(const std::string&)>& wanted) {
  std::vector<std::string> keys;
  for (int i = 0; i < size(); ++i) {
    if (!up(i)) continue;
    std::vector<std::string> names;
    try {
      names = probe(i)->keys(db);
    } catch (const std::runtime_error&) {
      forget_probe(i);
      if (!up(i)) continue;
      throw;
    }
    for (const auto& k : names) {
      if (wanted(k)) keys.push_back("m" + std::to_string(i) + " " + k);
    }
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

std::vector<std::string> RedisMasters::grant_keys(int db) {
  return keys_where(db, [](const std::string& k) {
    return k.find("{warden:") != std::string::npos && ends_with(k, ":rl");
  });
}

std::vector<std::string> RedisMasters::lock_keys(std::string_view group, std::string_view name,
                                                 int db) {
  const std::string tag = redlock_tag(group, name);
  return keys_where(db,
                    [&tag](const std::string& k) { return k.compare(0, tag.size(), tag) == 0; });
}

int RedisMasters::drop(std::string_view group, std::string_view name, int db) {
  int dropped = 0;
  const std::string key = grant_key(group, name);
  for (int i = 0; i < size(); ++i) {
    if (!up(i)) continue;
    try {
      if (command(i, {"DEL", key}, db) == "1") ++dropped;
    } catch (const std::runtime_error&) {
      if (!up(i)) continue;
      throw;
    }
  }
  return dropped;
}

void RedisMasters::plant(std::string_view group, std::string_view name,
                         const std::vector<int>& masters, const std::string& value,
                         std::chrono::milliseconds ttl, int db) {
  const std::string key = grant_key(group, name);
  for (int i : masters) {
    const std::string reply =
        command(i, {"SET", key, value, "PX", std::to_string(ttl.count())}, db);
    if (reply != "OK") throw std::runtime_error("redis masters: SET answered " + reply);
  }
}

std::string describe_keys(const std::vector<std::string>& keys) {
  std::string text;
  for (const auto& k : keys) text += "\n  " + k;
  return text.empty() ? " none" : text;
}

}  // namespace warden::testing

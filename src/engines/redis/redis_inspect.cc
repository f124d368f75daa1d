// redis://'s status: the form of a lock's :i key (TYPE), then one MULTI of plain reads of
// its keys (lua/lock_base.lua has the data model) with Redis' TIME inside it, interpreted here as
// the scripts would on their next call — a lease or a liveness that ran out counts as gone, an
// expired holder's lock-delay as running — without writing anything. A group is listed by SCAN over
// the group's keys, then the same reads per lock, pipelined.
#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engines/redis/lock_keys.h"
#include "engines/redis/redis_engine.h"
#include "engines/resp_client/errors.h"
#include "engines/resp_client/glob.h"

namespace warden::engines::redis {
namespace {

using resp_client::Command;
using resp_client::Reply;
using std::chrono::milliseconds;

// Locks read per pipelined round while listing: bounds one round's reply.
constexpr std::size_t kListBatch = 100;
// Keys SCAN looks at per call (a hint to Redis, not a bound on the reply).
constexpr const char* kScanCount = "1000";

// What the lock's :i key is (lua/lock_base.lua): the hash (or nothing), or the string
// form of an exclusive holder alone in the lock.
enum class Form { hash, string };

// The reads of one lock: MULTI, TIME, then for the hash form :i, the shared holders :h,
// the queue :q, the waiters' liveness :w and the admitted waiters :p; for the string
// form (in which the other keys do not exist) its value and its expiry; EXEC.
constexpr std::size_t kHashReads = 6;
constexpr std::size_t kStringReads = 3;

std::vector<Command> reads_of(const core::LockKey& key, Form form) {
  const LockKeys k = LockKeys::of(key);
  if (form == Form::string) {
    return {{"MULTI"}, {"TIME"}, {"GET", k.info}, {"PTTL", k.info}, {"EXEC"}};
  }
  return {{"MULTI"},
          {"TIME"},
          {"HGETALL", k.info},
          {"ZRANGE", k.holders, "0", "-1", "WITHSCORES"},
          {"LRANGE", k.queue, "0", "-1"},
          {"ZRANGE", k.waiters, "0", "-1", "WITHSCORES"},
          {"ZRANGE", k.pending, "0", "-1", "WITHSCORES"},
          {"EXEC"}};
}

class Reader {
 public:
  Reader(const Reply& whole, std::string context) : whole_(whole), context_(std::move(context)) {}

  [[noreturn]] void fail() const { throw resp_client::unexpected_reply(whole_, context_); }

  std::int64_t number(std::string_view text) const {
    std::int64_t n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc() || end != text.data() + text.size()) fail();
    return n;
  }

  const Reply& array(const Reply& r) const {
    if (!r.is_array()) fail();
    return r;
  }

  // A flat [a, b, a, b, ...] reply (HGETALL, ZRANGE WITHSCORES) as pairs.
  std::vector<std::pair<std::string, std::string>> pairs(const Reply& r) const {
    array(r);
    if (r.elements.size() % 2 != 0) fail();
    std::vector<std::pair<std::string, std::string>> out;
    for (std::size_t i = 0; i < r.elements.size(); i += 2) {
      out.emplace_back(r.elements[i].text, r.elements[i + 1].text);
    }
    return out;
  }

 private:
  const Reply& whole_;
  std::string context_;
};

milliseconds left(std::int64_t now, std::int64_t until) {
  return milliseconds(std::max<std::int64_t>(0, until - now));
}

// A queued or admitted entry: "x:…", "s:…", or a semaphore's "sPERMITS:…".
WaiterStatus waiter_of(std::string_view entry, const Reader& r) {
  if (entry.starts_with("x:")) return WaiterStatus{Mode::exclusive, std::nullopt};
  if (entry.starts_with("s:")) return WaiterStatus{Mode::shared, std::nullopt};
  const auto colon = entry.find(':');
  if (!entry.starts_with('s') || colon == std::string_view::npos || colon < 2) r.fail();
  const auto permits = r.number(entry.substr(1, colon - 1));
  if (permits < 1 || permits > 1'000'000) r.fail();
  return WaiterStatus{Mode::shared, std::nullopt, static_cast<std::uint32_t>(permits)};
}

// A field of :i that holds a count of permits ("cap", "n:TOKEN"), or 0 without it.
std::uint32_t permits_in(const std::map<std::string, std::string>& info, const std::string& field,
                         const Reader& r) {
  const auto it = info.find(field);
  if (it == info.end()) return 0;
  const auto permits = r.number(it->second);
  if (permits < 1 || permits > 1'000'000) r.fail();
  return static_cast<std::uint32_t>(permits);
}

// Checks EXEC's reply of reads_of(); returns Redis' TIME in it, in ms.
std::int64_t checked_exec(const Reply& exec, std::size_t reads, const std::string& context) {
  if (exec.is_error()) throw resp_client::reply_error(exec, context);
  const Reader r(exec, context);
  if (!exec.is_array() || exec.elements.size() != reads) r.fail();
  for (const Reply& e : exec.elements) {
    if (e.is_error()) throw resp_client::reply_error(e, context);
  }
  const Reply& time = r.array(exec.elements[0]);
  if (time.elements.size() != 2) r.fail();
  return r.number(time.elements[0].text) * 1000 + r.number(time.elements[1].text) / 1000;
}

// The string form: "TOKEN OWNER", held until the key expires; its holder's value is
// empty (a candidate with a value is granted in the hash form).
LockStatus interpret_string(const Reply& exec, const core::LockKey& key,
                            const std::string& context) {
  checked_exec(exec, kStringReads, context);
  const Reader r(exec, context);
  LockStatus s;
  s.group = key.group;
  s.name = key.name;
  const Reply& value = exec.elements[1];
  const Reply& pttl = exec.elements[2];
  if (value.is_nil()) return s;  // expired (or released) since its type was read
  if (!pttl.is_integer()) r.fail();
  const auto space = value.text.find(' ');
  if (space == std::string::npos) r.fail();
  const auto token = r.number(std::string_view(value.text).substr(0, space));
  if (pttl.integer > 0) {
    s.holders.push_back(HolderStatus{Mode::exclusive, static_cast<std::uint64_t>(token),
                                     milliseconds(pttl.integer)});
  }
  return s;
}

// EXEC's reply of the hash form's reads, as the scripts would see the lock now.
LockStatus interpret_hash(const Reply& exec, const core::LockKey& key, const std::string& context) {
  const std::int64_t now = checked_exec(exec, kHashReads, context);
  const Reader r(exec, context);

  LockStatus s;
  s.group = key.group;
  s.name = key.name;
  std::map<std::string, std::string> info;
  for (auto& [field, value] : r.pairs(exec.elements[1])) info.emplace(field, value);
  std::int64_t blocked_until = info.contains("delay") ? r.number(info["delay"]) : 0;

  // The exclusive holder: "TOKEN DEADLINE LOCK_DELAY OWNER", with an election's value in
  // "v" (absent for an empty one); one whose lease ran out is gone, and its lock-delay
  // runs from its deadline (as the next script will record).
  if (auto x = info.find("x"); x != info.end()) {
    const std::string& v = x->second;
    const auto a = v.find(' ');
    const auto b = a == std::string::npos ? a : v.find(' ', a + 1);
    const auto c = b == std::string::npos ? b : v.find(' ', b + 1);
    if (c == std::string::npos) r.fail();
    const auto token = r.number(std::string_view(v).substr(0, a));
    const auto deadline = r.number(std::string_view(v).substr(a + 1, b - a - 1));
    const auto delay = r.number(std::string_view(v).substr(b + 1, c - b - 1));
    if (deadline > now) {
      const auto value = info.find("v");
      s.holders.push_back(HolderStatus{Mode::exclusive, static_cast<std::uint64_t>(token),
                                       left(now, deadline), 0,
                                       value == info.end() ? std::string() : value->second});
    } else {
      blocked_until = std::max(blocked_until, deadline + delay);
    }
  }
  // Shared holders, each with its own token and deadline, shown in grant (token) order.
  std::vector<std::pair<std::int64_t, std::int64_t>> shared;  // token, deadline
  for (const auto& [token_text, deadline_text] : r.pairs(exec.elements[2])) {
    const auto token = r.number(token_text);
    const auto deadline = r.number(deadline_text);
    if (deadline > now) {
      shared.emplace_back(token, deadline);
      continue;
    }
    // "LOCK_DELAY OWNER" of t:TOKEN gives the expired holder's lock-delay.
    if (auto t = info.find("t:" + token_text); t != info.end()) {
      const auto space = t->second.find(' ');
      if (space == std::string::npos) r.fail();
      blocked_until = std::max(blocked_until, deadline + r.number(t->second.substr(0, space)));
    }
  }
  std::sort(shared.begin(), shared.end());
  for (const auto& [token, deadline] : shared) {
    s.holders.push_back(HolderStatus{Mode::shared, static_cast<std::uint64_t>(token),
                                     left(now, deadline),
                                     permits_in(info, "n:" + std::to_string(token), r)});
  }
  s.permits = permits_in(info, "cap", r);  // a semaphore's

  // Waiters: first those admitted but not yet picked up (:p, the next to hold), then
  // the queue :q in order, skipping entries whose liveness ran out. Entries carry no
  // acquire deadline (only a liveness the waiter refreshes), so deadline_left is unknown.
  for (const auto& [entry, pickup] : r.pairs(exec.elements[5])) {
    if (r.number(pickup) > now) s.waiters.push_back(waiter_of(entry, r));
  }
  std::map<std::string, std::int64_t> live;
  for (const auto& [entry, deadline] : r.pairs(exec.elements[4])) {
    live.emplace(entry, r.number(deadline));
  }
  for (const Reply& e : r.array(exec.elements[3]).elements) {
    const auto l = live.find(e.text);
    if (l != live.end() && l->second > now) {
      s.waiters.push_back(waiter_of(e.text, r));
    }
  }
  if (blocked_until > now) s.lock_delay_left = left(now, blocked_until);
  return s;
}

// A WRONGTYPE reply inside EXEC: the lock changed form between reading its type and
// reading it (a waiter arrived, or the string form went and the hash came).
bool changed_form(const Reply& exec) {
  if (!exec.is_array()) return false;
  return std::any_of(exec.elements.begin(), exec.elements.end(),
                     [](const Reply& e) { return e.error_code() == "WRONGTYPE"; });
}

// How often a lock whose form keeps changing under the reads is read again.
constexpr int kReadAttempts = 5;

// Reads every key's form (TYPE of :i), then reads_of() them all in a second pipelined
// round; the statuses in order.
std::vector<LockStatus> read_locks(resp_client::Pipeline& pipeline,
                                   const std::vector<core::LockKey>& keys,
                                   const std::string& endpoint) {
  const std::string context = "status read on " + endpoint;
  std::vector<std::optional<LockStatus>> out(keys.size());
  std::vector<std::size_t> todo(keys.size());
  for (std::size_t n = 0; n < keys.size(); ++n) todo[n] = n;
  for (int attempt = 1; !todo.empty(); ++attempt) {
    std::vector<Command> types;
    for (std::size_t n : todo) types.push_back({"TYPE", LockKeys::of(keys[n]).info});
    const auto typed = pipeline.run(std::move(types));
    std::vector<Form> forms;
    std::vector<Command> commands;
    for (std::size_t i = 0; i < todo.size(); ++i) {
      const Reply& type = typed.replies.at(i);
      if (type.is_error()) throw resp_client::reply_error(type, context);
      forms.push_back(type.text == "string" ? Form::string : Form::hash);
      auto reads = reads_of(keys[todo[i]], forms.back());
      commands.insert(commands.end(), std::make_move_iterator(reads.begin()),
                      std::make_move_iterator(reads.end()));
    }
    const auto result = pipeline.run(std::move(commands));
    std::vector<std::size_t> again;
    std::size_t at = 0;
    for (std::size_t i = 0; i < todo.size(); ++i) {
      const std::size_t reads = forms[i] == Form::string ? kStringReads : kHashReads;
      // MULTI and the queued reads answer OK / QUEUED, or an error that EXEC repeats.
      for (std::size_t j = 0; j < reads + 1; ++j) {
        const Reply& reply = result.replies.at(at + j);
        if (reply.is_error()) throw resp_client::reply_error(reply, context);
      }
      const Reply& exec = result.replies.at(at + reads + 1);
      at += reads + 2;
      const core::LockKey& key = keys[todo[i]];
      if (changed_form(exec) && attempt < kReadAttempts) {
        again.push_back(todo[i]);
      } else {
        out[todo[i]] = forms[i] == Form::string ? interpret_string(exec, key, context)
                                                : interpret_hash(exec, key, context);
      }
    }
    todo = std::move(again);
  }
  std::vector<LockStatus> statuses;
  statuses.reserve(out.size());
  for (auto& s : out) statuses.push_back(std::move(*s));
  return statuses;
}

// The lock name in a key of `prefix` ("{warden:GROUP/"), or nullopt for a key that is
// not one of a redis:// lock's (another engine's keys can share the tag).
std::optional<std::string> name_in(std::string_view key, std::string_view prefix) {
  constexpr std::string_view kSuffixes = "hiqwp";
  if (!key.starts_with(prefix) || key.size() < prefix.size() + 4) return std::nullopt;
  const std::string_view tail = key.substr(key.size() - 3);
  if (tail[0] != '}' || tail[1] != ':' || kSuffixes.find(tail[2]) == std::string_view::npos) {
    return std::nullopt;
  }
  return std::string(key.substr(prefix.size(), key.size() - prefix.size() - 3));
}

}  // namespace

LockStatus inspect_on(resp_client::Pipeline& pipeline, const core::LockKey& key,
                      const std::string& endpoint) {
  return read_locks(pipeline, {key}, endpoint).at(0);
}

std::vector<LockSummary> list_on(resp_client::Pipeline& pipeline, std::string_view group,
                                 const std::string& endpoint) {
  // Every key of the group's locks starts with "{warden:GROUP/" (lock_keys.h); a name
  // is the raw bytes between that and the key's fixed suffix "}:X".
  const std::string prefix = "{warden:" + std::string(group) + '/';
  const std::string pattern = resp_client::glob_escaped(prefix) + '*';
  const std::string context = "SCAN on " + endpoint;
  std::set<std::string> names;  // SCAN may return a key more than once
  std::string cursor = "0";
  do {
    const auto result = pipeline.run({{"SCAN", cursor, "MATCH", pattern, "COUNT", kScanCount}});
    const Reply& reply = result.replies.at(0);
    if (reply.is_error()) throw resp_client::reply_error(reply, context);
    if (!reply.is_array() || reply.elements.size() != 2 || !reply.elements[1].is_array()) {
      throw resp_client::unexpected_reply(reply, context);
    }
    for (const Reply& key : reply.elements[1].elements) {
      if (auto name = name_in(key.text, prefix)) names.insert(std::move(*name));
    }
    cursor = reply.elements[0].text;
  } while (cursor != "0");

  // Counts per lock, read as inspect reads one; locks whose keys hold nothing live any
  // more (they vanish by expiry or on the next script call) are left out.
  std::vector<LockSummary> out;
  std::vector<core::LockKey> batch;
  auto flush = [&] {
    for (const LockStatus& s : read_locks(pipeline, batch, endpoint)) {
      if (!s.holders.empty() || !s.waiters.empty() || s.lock_delay_left.count() > 0) {
        out.push_back(LockSummary{s.name, s.holders.size(), s.waiters.size()});
      }
    }
    batch.clear();
  };
  for (const std::string& name : names) {  // std::set: bytewise order
    batch.push_back(core::LockKey{std::string(group), name});
    if (batch.size() == kListBatch) flush();
  }
  if (!batch.empty()) flush();
  return out;
}

}  // namespace warden::engines::redis

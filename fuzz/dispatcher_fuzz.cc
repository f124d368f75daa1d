// fuzz/dispatcher_fuzz.cc — fuzz target for wardend's command logic (server/dispatcher.h).
//
// The input drives a Dispatcher the way the network shell does, on four connection
// slots and a fake clock:
//
//   byte 0      the configuration: a password or none, and small limits (connections
//               1..4, keys 1..4, waiters per key 1..4), a restart embargo or none
//   then steps  one control byte each: bits 0-1 pick the slot, bits 5-7 move the clock
//               on by (n * n * 5) ms, bits 2-4 pick the action:
//                 0..3  execute the RESP request that follows (resp::parse_request; a
//                       framing error closes the slot, as the shell does, and skips to
//                       the next LF); a parked slot's request is dropped, since the
//                       shell does not read it until the parked one is answered. In
//                       RENEW and RELEASE, a secret "@" stands for the owner secret the
//                       grant with that token got (the harness remembers them from the
//                       grant replies), so the input reaches the holder's paths; any
//                       other secret is a stranger's guess
//                 4     advance(now) by the next byte squared in ms
//                 5     disconnect the slot, then connect it again as a new connection
//                 6     cancel_parked (the client half-closed)
//                 7     toggle durability failures (the GrantGuard's note_hold throws)
//
// After every step it checks what must always hold:
//   - every reply is exactly one well-formed RESP value; errors carry a known code;
//   - a wakeup goes only to a slot that is parked, and resolves it (never two per
//     parked request), or to a waits connection (WAITS), tagged with one of its queued
//     tags, which it resolves; a request there is answered nothing only when queued
//     (an ACQUIRE ... TAG t) or when it had nothing to withdraw (WITHDRAW t); cancel_parked on a parked slot resolves it in the same step; a
//     disconnected connection gets no wakeup;
//   - grant replies carry tokens never seen before and a secret of 32 lower-case hex
//     characters never seen before; a wakeup's waited_us is between 0 and the time
//     since its request was read; an immediate grant waited 0;
//   - RENEW and RELEASE answer :1 only with the secret of that token's grant;
//   - the dispatcher's counts match: parked == the table's waiters == slots parked plus
//     tagged requests queued;
//     connections == slots connected; the table's keys, holders and waiters equal the
//     sums of inspect() over every key the input named; limits are never exceeded;
//   - after advance(now), nothing is due at or before now.
//
// A failed check prints what failed and aborts, which libFuzzer reports as a crash.
// See CMakeLists.txt here for running it.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "server/dispatcher.h"
#include "server/resp.h"
#include "warden/error.h"

namespace warden::server {
namespace {

using std::chrono::milliseconds;

constexpr std::size_t kSlots = 4;
constexpr std::string_view kCodes[] = {"ERR",       "INVALID", "NOAUTH",
                                       "WRONGPASS", "LIMIT",   "STARTING"};

// Where the RESP value at `pos` ends, or npos if it is not one complete value.
std::size_t value_end(std::string_view b, std::size_t pos, int depth = 0) {
  constexpr auto npos = std::string_view::npos;
  if (pos >= b.size() || depth > 4) return npos;
  const std::size_t eol = b.find("\r\n", pos);
  if (eol == npos) return npos;
  const std::string_view line = b.substr(pos + 1, eol - pos - 1);
  if (line.find_first_of("\r\n") != npos) return npos;
  const auto number = [&](long long& n) {
    if (line.empty()) return false;
    std::size_t i = line[0] == '-' ? 1 : 0;
    if (i == line.size()) return false;
    n = 0;
    for (; i < line.size(); ++i) {
      if (line[i] < '0' || line[i] > '9' || n > (1LL << 50)) return false;
      n = n * 10 + (line[i] - '0');
    }
    if (line[0] == '-') n = -n;
    return true;
  };
  long long n = 0;
  switch (b[pos]) {
    case '+':
      return eol + 2;
    case '-': {
      const std::string_view code = line.substr(0, line.find(' '));
      const bool known = std::find(std::begin(kCodes), std::end(kCodes), code) != std::end(kCodes);
      return known ? eol + 2 : npos;
    }
    case ':':
      return number(n) ? eol + 2 : npos;
    case '$': {
      if (!number(n) || n < -1) return npos;
      if (n == -1) return eol + 2;
      const std::size_t end = eol + 2 + static_cast<std::size_t>(n);
      if (end + 2 > b.size() || b.substr(end, 2) != "\r\n") return npos;
      return end + 2;
    }
    case '*': {
      if (!number(n) || n < 0) return npos;
      std::size_t p = eol + 2;
      for (long long i = 0; i < n; ++i) {
        p = value_end(b, p, depth + 1);
        if (p == npos) return npos;
      }
      return p;
    }
  }
  return npos;
}

bool one_value(std::string_view reply) { return value_end(reply, 0) == reply.size(); }

// [token, waited_us, secret] from a grant reply; false for anything else.
bool parse_grant(std::string_view reply, std::int64_t& token, std::int64_t& waited,
                 std::string& secret) {
  if (!reply.starts_with("*3\r\n:")) return false;
  const auto read = [](std::string_view s, std::size_t& pos, std::int64_t& out) {
    out = 0;
    bool negative = pos < s.size() && s[pos] == '-';
    if (negative) ++pos;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') out = out * 10 + (s[pos++] - '0');
    if (negative) out = -out;
    pos += 2;  // CRLF
  };
  std::size_t pos = 5;
  read(reply, pos, token);
  WARDEN_FUZZ_CHECK(reply.substr(pos, 1) == ":");
  ++pos;
  read(reply, pos, waited);
  WARDEN_FUZZ_CHECK(reply.substr(pos, 5) == "$32\r\n");
  secret = std::string(reply.substr(pos + 5, 32));
  WARDEN_FUZZ_CHECK(secret.size() == 32 &&
                    secret.find_first_not_of("0123456789abcdef") == std::string::npos);
  WARDEN_FUZZ_CHECK(reply.size() == pos + 5 + 32 + 2);
  return true;
}

class Guard final : public GrantGuard {
 public:
  std::uint64_t embargo_ms(Time now) const override {
    return now < until
               ? static_cast<std::uint64_t>(std::chrono::ceil<milliseconds>(until - now).count())
               : 0;
  }
  void note_hold(milliseconds /*ttl_plus_delay*/) override {
    if (failing) throw Error(Errc::unavailable, "injected durability failure");
  }
  Time until{};
  bool failing = false;
};

struct Slot {
  bool connected = false;
  ConnId id = 0;
  bool parked = false;
  Time parked_at{};
  // A waits connection (WAITS): its tagged requests still queued, by tag, with when
  // each was read. Such a slot is never parked.
  bool waits = false;
  std::map<std::string, Time> tagged;
};

// A tagged answer `[tag, inner]`: its tag and its inner value; false for anything else.
bool untag(std::string_view reply, std::string& tag, std::string_view& inner) {
  if (!reply.starts_with("*2\r\n$")) return false;
  const auto len_end = reply.find("\r\n", 5);
  if (len_end == std::string_view::npos) return false;
  std::size_t len = 0;
  for (std::size_t i = 5; i < len_end; ++i) len = len * 10 + static_cast<std::size_t>(reply[i] - '0');
  tag = std::string(reply.substr(len_end + 2, len));
  inner = reply.substr(len_end + 2 + len + 2);
  return true;
}

class Run {
 public:
  Run(const std::uint8_t* data, std::size_t size) : in_(reinterpret_cast<const char*>(data), size) {
    const std::uint8_t c = size > 0 ? data[0] : 0;
    in_.remove_prefix(std::min<std::size_t>(1, size));
    DispatcherConfig config;
    if (c & 1) config.password = "pw";
    config.limits.max_connections = 1 + ((c >> 1) & 3);
    config.limits.max_keys = 1 + ((c >> 3) & 3);
    config.limits.max_waiters_per_key = 1 + ((c >> 5) & 3);
    config.version = "fuzz";
    limits_ = config.limits;
    now_ = Time{} + std::chrono::hours(1);
    if (c & 0x80) guard_.until = now_ + milliseconds(300);
    d_ = std::make_unique<Dispatcher>(config, nullptr, &guard_);
    for (std::size_t s = 0; s < kSlots; ++s) connect(s);
  }

  void run() {
    while (!in_.empty()) {
      const auto c = static_cast<std::uint8_t>(in_[0]);
      in_.remove_prefix(1);
      const std::size_t s = c & 3;
      const int step = c >> 5;
      now_ += milliseconds(step * step * 5);
      switch ((c >> 2) & 7) {
        case 4: {
          const int b = in_.empty() ? 0 : static_cast<std::uint8_t>(in_[0]);
          if (!in_.empty()) in_.remove_prefix(1);
          now_ += milliseconds(b * b);
          d_->advance(now_);
          const auto next = d_->next_wakeup();
          WARDEN_FUZZ_CHECK(!next || *next > now_);
          break;
        }
        case 5:
          if (slots_[s].connected) {
            d_->disconnect(slots_[s].id, now_);
            gone_.insert(slots_[s].id);
            slots_[s] = Slot{};
          }
          connect(s);
          break;
        case 6:
          cancel(s);
          break;
        case 7:
          guard_.failing = !guard_.failing;
          break;
        default:
          if (!request(s)) return;  // an incomplete request ends the input
      }
      wakeups();
      check_counts();
    }
  }

 private:
  void connect(std::size_t s) {
    const ConnId id = ++next_id_;
    const std::size_t before = d_->stats().connections;
    if (d_->connect(id)) {
      slots_[s] = Slot{true, id, false, {}, false, {}};
    } else {
      WARDEN_FUZZ_CHECK(before >= limits_.max_connections);
      WARDEN_FUZZ_CHECK(d_->stats().connections == before);
      gone_.insert(id);
    }
  }

  void cancel(std::size_t s) {
    Slot& slot = slots_[s];
    if (!slot.connected) return;
    d_->cancel_parked(slot.id, now_);
    wakeups();
    // Resolved (nil, or the grant that came first) in this very step.
    WARDEN_FUZZ_CHECK(!slot.parked);
    WARDEN_FUZZ_CHECK(slot.tagged.empty());
  }

  // Executes the request at the front of the input on slot `s`; false at the end.
  bool request(std::size_t s) {
    const resp::Parsed parsed = resp::parse_request(in_, resp::Limits{4096, 16});
    if (parsed.status == resp::Status::incomplete) return false;
    Slot& slot = slots_[s];
    if (parsed.status == resp::Status::error) {
      WARDEN_FUZZ_CHECK(parsed.consumed == 0 && !parsed.error.empty());
      if (slot.connected) {  // the shell answers -ERR and closes
        d_->disconnect(slot.id, now_);
        gone_.insert(slot.id);
        slot = Slot{};
      }
      const auto lf = in_.find('\n');
      in_.remove_prefix(lf == std::string_view::npos ? in_.size() : lf + 1);
      return true;
    }
    WARDEN_FUZZ_CHECK(parsed.consumed > 0 && parsed.consumed <= in_.size());
    std::vector<std::string> args(parsed.args.begin(), parsed.args.end());
    in_.remove_prefix(parsed.consumed);
    if (!slot.connected || slot.parked || args.empty()) return true;
    if (args.size() >= 2) keys_.insert(args[1]);
    // RENEW/RELEASE key token secret ...: "@" is the holder's secret for that token.
    std::string upper_cmd = args[0];
    for (char& ch : upper_cmd) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    const bool by_owner = upper_cmd == "RENEW" || upper_cmd == "RELEASE";
    if (by_owner && args.size() >= 4 && args[3] == "@") {
      if (const auto it = owners_.find(args[2]); it != owners_.end()) args[3] = it->second;
    }
    const bool rightful =
        by_owner && args.size() >= 4 && owners_.contains(args[2]) && owners_[args[2]] == args[3];

    std::vector<std::string_view> views(args.begin(), args.end());
    std::string reply;
    const auto outcome = d_->execute(slot.id, views, now_, reply);
    if (slot.waits && outcome != Dispatcher::Outcome::close) {
      waits_reply(slot, upper_cmd, args, reply);
      return true;
    }
    if (upper_cmd == "WAITS" && reply == "+OK\r\n") slot.waits = true;
    switch (outcome) {
      case Dispatcher::Outcome::parked:
        WARDEN_FUZZ_CHECK(reply.empty());
        slot.parked = true;
        slot.parked_at = now_;
        break;
      case Dispatcher::Outcome::replied:
      case Dispatcher::Outcome::close: {
        WARDEN_FUZZ_CHECK(one_value(reply));
        // Only the holder's secret renews or releases.
        if (by_owner && !rightful) WARDEN_FUZZ_CHECK(reply != ":1\r\n");
        std::int64_t token = 0, waited = 0;
        std::string secret;
        if (parse_grant(reply, token, waited, secret)) {
          WARDEN_FUZZ_CHECK(waited == 0);
          remember(token, secret);
        }
        if (outcome == Dispatcher::Outcome::close) {
          d_->disconnect(slot.id, now_);
          gone_.insert(slot.id);
          slot = Slot{};
        }
        break;
      }
    }
    return true;
  }

  void wakeups() {
    for (const auto& w : d_->take_wakeups()) {
      WARDEN_FUZZ_CHECK(!gone_.contains(w.conn));
      Slot* slot = nullptr;
      for (auto& s : slots_) {
        if (s.connected && s.id == w.conn) slot = &s;
      }
      WARDEN_FUZZ_CHECK(slot != nullptr);
      if (slot->waits) {  // a tagged answer to one of its queued requests
        std::string tag;
        std::string_view inner;
        WARDEN_FUZZ_CHECK(one_value(w.reply) && untag(w.reply, tag, inner));
        const auto it = slot->tagged.find(tag);
        WARDEN_FUZZ_CHECK(it != slot->tagged.end());
        const auto since =
            std::chrono::duration_cast<std::chrono::microseconds>(now_ - it->second).count();
        slot->tagged.erase(it);
        std::int64_t token = 0, waited = 0;
        std::string secret;
        if (parse_grant(inner, token, waited, secret)) {
          remember(token, secret);
          WARDEN_FUZZ_CHECK(waited >= 0 && waited <= since);
        } else {
          WARDEN_FUZZ_CHECK(inner == "$-1\r\n");
        }
        continue;
      }
      // Pushes to a watcher (WATCH) or a revoke listener (REVOKES) answer no request.
      if (w.reply.starts_with("*2\r\n$7\r\nCHANGED\r\n") ||
          w.reply.starts_with("*3\r\n$6\r\nREVOKE\r\n")) {
        WARDEN_FUZZ_CHECK(!slot->parked);
        continue;
      }
      WARDEN_FUZZ_CHECK(slot->parked);  // never a second wakeup for one parked request
      slot->parked = false;
      WARDEN_FUZZ_CHECK(one_value(w.reply));
      std::int64_t token = 0, waited = 0;
      std::string secret;
      if (parse_grant(w.reply, token, waited, secret)) {
        remember(token, secret);
        const auto since =
            std::chrono::duration_cast<std::chrono::microseconds>(now_ - slot->parked_at).count();
        WARDEN_FUZZ_CHECK(waited >= 0 && waited <= since);
      } else {
        WARDEN_FUZZ_CHECK(w.reply == "$-1\r\n");
      }
    }
  }

  // A new grant: its token and its secret were never handed out before.
  void remember(std::int64_t token, const std::string& secret) {
    WARDEN_FUZZ_CHECK(token > 0 && tokens_.insert(token).second);
    WARDEN_FUZZ_CHECK(secrets_.insert(secret).second);
    owners_[std::to_string(token)] = secret;
  }

  // A waits connection's reply to `cmd`: nothing (a queued ACQUIRE ... TAG t, or a
  // WITHDRAW with nothing to withdraw), an untagged PONG, or one tagged answer.
  void waits_reply(Slot& slot, const std::string& cmd, const std::vector<std::string>& args,
                   const std::string& reply) {
    const std::string tag = args.back();
    if (reply.empty()) {
      WARDEN_FUZZ_CHECK(cmd == "ACQUIRE" || cmd == "WITHDRAW");
      if (cmd == "ACQUIRE") {
        WARDEN_FUZZ_CHECK(!slot.tagged.contains(tag));
        slot.tagged.emplace(tag, now_);
      } else {
        WARDEN_FUZZ_CHECK(!slot.tagged.contains(tag));  // else it would have withdrawn it
      }
      return;
    }
    WARDEN_FUZZ_CHECK(one_value(reply));
    if (reply == "+PONG\r\n") return;
    std::string answered;
    std::string_view inner;
    WARDEN_FUZZ_CHECK(untag(reply, answered, inner) && answered == tag);
    if (cmd == "WITHDRAW") {
      WARDEN_FUZZ_CHECK(inner == "$-1\r\n" && slot.tagged.erase(tag) == 1);
      return;
    }
    std::int64_t token = 0, waited = 0;
    std::string secret;
    if (parse_grant(inner, token, waited, secret)) {
      WARDEN_FUZZ_CHECK(waited == 0);
      remember(token, secret);
    }
  }

  void check_counts() {
    const DispatcherStats s = d_->stats();
    std::size_t connected = 0, parked = 0;
    for (const auto& slot : slots_) {
      connected += slot.connected ? 1 : 0;
      parked += (slot.parked ? 1 : 0) + slot.tagged.size();
    }
    WARDEN_FUZZ_CHECK(s.connections == connected);
    WARDEN_FUZZ_CHECK(s.connections <= limits_.max_connections);
    WARDEN_FUZZ_CHECK(s.parked == parked);
    WARDEN_FUZZ_CHECK(s.table.waiters == parked);
    WARDEN_FUZZ_CHECK(s.table.keys <= limits_.max_keys);

    std::size_t keys = 0, holders = 0, waiters = 0;
    for (const auto& key : keys_) {
      const auto info = d_->table().inspect(key);
      if (!info.holders.empty() || !info.waiters.empty() || info.delayed_until) ++keys;
      holders += info.holders.size();
      waiters += info.waiters.size();
      WARDEN_FUZZ_CHECK(info.waiters.size() <= limits_.max_waiters_per_key);
      // Every held grant was announced (a grant nobody could take was given back).
      for (const auto& h : info.holders) {
        WARDEN_FUZZ_CHECK(tokens_.contains(static_cast<std::int64_t>(h.token)));
      }
    }
    WARDEN_FUZZ_CHECK(keys == s.table.keys);
    WARDEN_FUZZ_CHECK(holders == s.table.holders);
    WARDEN_FUZZ_CHECK(waiters == s.table.waiters);
  }

  std::string_view in_;
  Limits limits_;
  Time now_;
  Guard guard_;
  std::unique_ptr<Dispatcher> d_;
  Slot slots_[kSlots];
  ConnId next_id_ = 0;
  std::set<ConnId> gone_;
  std::set<std::string> keys_;
  std::set<std::int64_t> tokens_;
  std::set<std::string> secrets_;
  std::map<std::string, std::string> owners_;  // token (as text) → its grant's secret
};

}  // namespace
}  // namespace warden::server

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  warden::server::Run run(data, size);
  run.run();
  return 0;
}

#include "cli/status_format.h"

#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "cli/failure.h"

namespace warden::cli {
namespace {

using nlohmann::json;

std::string ms_or(const std::optional<std::chrono::milliseconds>& ms, const char* otherwise) {
  return ms ? std::to_string(ms->count()) : std::string(otherwise);
}

json ms_or_null(const std::optional<std::chrono::milliseconds>& ms) {
  return ms ? json(ms->count()) : json(nullptr);
}

// "exclusive", "shared", or a semaphore's "permits:2".
std::string mode_text(Mode mode, std::uint32_t permits) {
  if (permits > 0) return "permits:" + std::to_string(permits);
  return std::string(to_string(mode));
}

}  // namespace

std::string lock_text(const LockStatus& s) {
  std::string out = fmt::format("lock {}\n", printable(s.group + '/' + s.name));
  if (s.permits > 0) {
    std::uint64_t held = 0;
    for (const HolderStatus& h : s.holders) held += h.permits;
    out += fmt::format("  a semaphore of {} permits, {} held\n", s.permits, held);
  }
  if (s.holders.empty() && s.waiters.empty()) out += "  free: no holders, no waiters\n";
  if (!s.holders.empty()) {
    out += fmt::format("  holders ({}):\n    {:<10} {:>20} {:>14}\n", s.holders.size(), "MODE",
                       "TOKEN", "TTL LEFT (ms)");
    for (const HolderStatus& h : s.holders) {
      out += fmt::format("    {:<10} {:>20} {:>14}\n", mode_text(h.mode, h.permits),
                         h.token == 0 ? std::string("unknown") : std::to_string(h.token),
                         ms_or(h.ttl_left, "session"));
    }
  }
  if (!s.waiters.empty()) {
    out += fmt::format("  waiters, in queue order ({}):\n    {:<10} {:>19}\n", s.waiters.size(),
                       "MODE", "DEADLINE LEFT (ms)");
    for (const WaiterStatus& w : s.waiters) {
      out += fmt::format("    {:<10} {:>19}\n", mode_text(w.mode, w.permits),
                         ms_or(w.deadline_left, "none"));
    }
  }
  out += fmt::format("  lock-delay left: {} ms\n", s.lock_delay_left.count());
  return out;
}

std::string lock_json(const std::string& url, const LockStatus& s) {
  json holders = json::array();
  for (const HolderStatus& h : s.holders) {
    holders.push_back({{"mode", to_string(h.mode)},
                       {"token", h.token == 0 ? json(nullptr) : json(h.token)},
                       {"ttl_left_ms", ms_or_null(h.ttl_left)}});
    if (s.permits > 0) holders.back()["permits"] = h.permits;
  }
  json waiters = json::array();
  for (const WaiterStatus& w : s.waiters) {
    waiters.push_back(
        {{"mode", to_string(w.mode)}, {"deadline_left_ms", ms_or_null(w.deadline_left)}});
    if (s.permits > 0) waiters.back()["permits"] = w.permits;
  }
  // Names may hold any byte but NUL; the JSON text must stay valid UTF-8.
  json out{{"url", url},
           {"lock", s.group + '/' + s.name},
           {"holders", holders},
           {"waiters", waiters},
           {"lock_delay_left_ms", s.lock_delay_left.count()}};
  if (s.permits > 0) out["permits"] = s.permits;  // a semaphore's; absent for a lock
  return out.dump(-1, ' ', false, json::error_handler_t::replace) +
         "\n";
}

std::string group_text(const std::string& group, const std::vector<LockSummary>& locks) {
  std::string out =
      fmt::format("group {}: {} lock{}\n", group, locks.size(), locks.size() == 1 ? "" : "s");
  if (locks.empty()) return out;
  out += fmt::format("    {:>7} {:>7}  {}\n", "HOLDERS", "WAITERS", "NAME");
  for (const LockSummary& l : locks) {
    out += fmt::format("    {:>7} {:>7}  {}\n", l.holders, l.waiters, printable(l.name));
  }
  return out;
}

std::string group_json(const std::string& url, const std::string& group,
                       const std::vector<LockSummary>& locks) {
  json list = json::array();
  for (const LockSummary& l : locks) {
    list.push_back({{"name", l.name}, {"holders", l.holders}, {"waiters", l.waiters}});
  }
  return json{{"url", url}, {"group", group}, {"locks", list}}.dump(
             -1, ' ', false, json::error_handler_t::replace) +
         "\n";
}

}  // namespace warden::cli

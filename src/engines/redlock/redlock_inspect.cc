#include "engines/redlock/redlock_inspect.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "engines/redlock/quorum.h"
#include "engines/resp_client/glob.h"
#include "engines/resp_client/script.h"
#include "warden/error.h"

namespace warden::engines::redlock {

extern const resp_client::Script k_inspect_script;
extern const resp_client::Script k_scan_script;

namespace {

using resp_client::Leg;
using resp_client::Reply;
using resp_client::ScriptCall;
using std::chrono::milliseconds;

// SCAN's COUNT hint, and a bound on the pages one master's scan may take, so a listing
// always ends (a keyspace changing under a scan can only add pages, never loop it).
constexpr const char* kScanCount = "1000";
constexpr int kMaxScanPages = 100'000;

std::optional<std::uint64_t> number(std::string_view text) {
  std::uint64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return n;
}

// One master's {VALUE, PTTL}; nullopt for a master that failed or answered anything else.
struct View {
  std::string value;  // "" when the key is absent
  std::int64_t pttl = -2;
};
std::optional<View> view_of(const Leg& leg) {
  if (!leg.ok() || leg.replies.size() != 1) return std::nullopt;
  const Reply& r = leg.replies.front();
  if (!r.is_array() || r.elements.size() != 2) return std::nullopt;
  const Reply& value = r.elements[0];
  const Reply& pttl = r.elements[1];
  if (value.type != Reply::Type::bulk || !pttl.is_integer()) return std::nullopt;
  return View{value.text, pttl.integer};
}

[[noreturn]] void too_few(std::size_t answered, std::size_t masters, std::string_view what) {
  throw Error(Errc::unavailable, "redlock " + std::string(what) + ": " + std::to_string(answered) +
                                     " of " + std::to_string(masters) + " masters answered, " +
                                     std::to_string(quorum(masters)) + " needed");
}

// The masters' answers as a lock's status: the value a quorum holds, if it has its token.
// With `foreign_holders` (the simple naming, whose key other clients' locks use too), a
// value without one is a holder as well, with token 0: another client's SET NX lock, or
// a warden acquire between its SET and its token.
LockStatus status_of(const core::LockKey& key, const std::vector<Leg>& legs, std::size_t masters,
                     bool foreign_holders) {
  LockStatus status;
  status.group = key.group;
  status.name = key.name;
  std::size_t answered = 0;
  std::map<std::string, std::vector<std::int64_t>> holders;  // value -> PTTLs
  for (const Leg& leg : legs) {
    const auto view = view_of(leg);
    if (!view) continue;
    ++answered;
    if (!view->value.empty()) holders[view->value].push_back(view->pttl);
  }
  if (answered < quorum(masters)) too_few(answered, masters, "status");
  for (const auto& [value, pttls] : holders) {
    if (pttls.size() < quorum(masters)) continue;
    const auto colon = value.rfind(':');
    const auto token = colon == std::string::npos
                           ? std::nullopt
                           : number(std::string_view(value).substr(colon + 1));
    if (!token && !foreign_holders) continue;  // acquire under way: no token yet
    HolderStatus holder;
    holder.mode = Mode::exclusive;
    holder.token = token.value_or(0);
    holder.ttl_left =
        milliseconds(std::max<std::int64_t>(0, *std::min_element(pttls.begin(), pttls.end())));
    status.holders.push_back(holder);
  }
  return status;
}

// Every lock name of `group` with a grant key on some answering master.
std::set<std::string> names_on(Masters& masters, const KeyNaming& naming, std::string_view group,
                               milliseconds timeout) {
  const std::string pattern = naming.scan_pattern(group);
  std::set<std::string> names;
  std::vector<std::string> cursor(masters.size(), "0");
  std::vector<bool> scanning(masters.size(), true);
  std::vector<bool> finished(masters.size(), false);
  for (int page = 0; page < kMaxScanPages; ++page) {
    std::vector<std::vector<ScriptCall>> calls(masters.size());
    bool any = false;
    for (std::size_t i = 0; i < masters.size(); ++i) {
      if (!scanning[i]) continue;
      calls[i].push_back(ScriptCall{&k_scan_script, {}, {cursor[i], pattern, kScanCount}});
      any = true;
    }
    if (!any) break;
    const auto legs = masters.run(calls, timeout);
    for (std::size_t i = 0; i < masters.size(); ++i) {
      if (!scanning[i]) continue;
      const Leg& leg = legs[i];
      const bool well_formed = leg.ok() && leg.replies.size() == 1 &&
                               leg.replies.front().is_array() &&
                               !leg.replies.front().elements.empty() &&
                               leg.replies.front().elements.front().type == Reply::Type::bulk;
      if (!well_formed) {
        scanning[i] = false;  // this master's part of the listing is lost
        continue;
      }
      const auto& elements = leg.replies.front().elements;
      for (std::size_t k = 1; k < elements.size(); ++k) {
        if (auto name = naming.name_in(elements[k].text, group)) names.insert(std::move(*name));
      }
      cursor[i] = elements.front().text;
      if (cursor[i] == "0") {
        scanning[i] = false;
        finished[i] = true;
      }
    }
  }
  const auto complete =
      static_cast<std::size_t>(std::count(finished.begin(), finished.end(), true));
  if (complete < quorum(masters.size())) too_few(complete, masters.size(), "list");
  return names;
}

}  // namespace

LockStatus inspect_on(Masters& masters, const KeyNaming& naming, const core::LockKey& key,
                      milliseconds timeout) {
  const std::string lock_key = naming.of(key.group, key.name).lock;
  const auto legs = masters.run_everywhere(ScriptCall{&k_inspect_script, {lock_key}, {}}, timeout);
  return status_of(key, legs, masters.size(), naming.is_simple());
}

std::vector<LockSummary> list_on(Masters& masters, const KeyNaming& naming, std::string_view group,
                                 milliseconds timeout) {
  std::vector<LockSummary> out;
  for (const std::string& name : names_on(masters, naming, group, timeout)) {
    const LockStatus status =
        inspect_on(masters, naming, core::LockKey{std::string(group), name}, timeout);
    if (status.holders.empty()) continue;  // a minority's leftover: not held
    out.push_back(LockSummary{name, status.holders.size(), 0});
  }
  return out;  // std::set kept the names sorted
}

}  // namespace warden::engines::redlock

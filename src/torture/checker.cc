#include "torture/checker.h"

#include <algorithm>
#include <compare>
#include <iterator>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <utility>

namespace warden::torture {
namespace {

constexpr Nanos kNever = std::numeric_limits<Nanos>::max();

// A grant is one (client, token): the writes, releases and losses of a grant carry both.
struct GrantKey {
  int client = -1;
  std::uint64_t token = 0;
  auto operator<=>(const GrantKey&) const = default;
};

// A grant as its client saw it: from the grant event to the first release, lost notice
// and death after it (kNever: none came).
struct ClientHold {
  int client = -1;
  std::uint64_t token = 0;
  Nanos granted = 0;
  Nanos released = kNever;
  Nanos lost = kNever;
  Nanos died = kNever;
};

// A grant as the resource saw it: its first write's start to its last write's end.
struct ResourceHold {
  GrantKey grant;
  Nanos from = 0;
  Nanos to = 0;
};

// The client-side holds of a time-ordered history, in order of their grant.
std::vector<ClientHold> client_holds(const std::vector<Event>& events) {
  std::vector<ClientHold> holds;
  std::map<int, std::vector<std::size_t>> by_client;  // indices into holds, in time order
  // The latest hold of `client` with `token` granted by `time` (a release or loss names
  // the grant it ends); nullptr for none.
  auto find = [&](int client, std::uint64_t token, Nanos time) -> ClientHold* {
    auto it = by_client.find(client);
    if (it == by_client.end()) return nullptr;
    for (auto i = it->second.rbegin(); i != it->second.rend(); ++i) {
      ClientHold& hold = holds[*i];
      if (hold.token == token && hold.granted <= time) return &hold;
    }
    return nullptr;
  };
  for (const Event& e : events) {
    switch (e.kind) {
      case EventKind::grant:
        by_client[e.client].push_back(holds.size());
        holds.push_back({.client = e.client, .token = e.token, .granted = e.time});
        break;
      case EventKind::release:
        if (ClientHold* hold = find(e.client, e.token, e.time); hold && hold->released == kNever) {
          hold->released = e.time;
        }
        break;
      case EventKind::lost:
        if (ClientHold* hold = find(e.client, e.token, e.time); hold && hold->lost == kNever) {
          hold->lost = e.time;
        }
        break;
      case EventKind::death:
        if (auto it = by_client.find(e.client); it != by_client.end()) {
          for (std::size_t i : it->second) {
            if (holds[i].died == kNever) holds[i].died = e.time;
          }
        }
        break;
      default:
        break;
    }
  }
  return holds;
}

// Holds by their first write, then by grant (a deterministic order for the report).
std::vector<ResourceHold> resource_holds(const std::vector<Event>& events) {
  std::map<GrantKey, ResourceHold> by_grant;
  for (const Event& e : events) {
    if (e.kind != EventKind::write) continue;
    const GrantKey key{e.client, e.token};
    auto [it, inserted] = by_grant.try_emplace(key, ResourceHold{key, e.start, e.end});
    if (!inserted) {
      it->second.from = std::min(it->second.from, e.start);
      it->second.to = std::max(it->second.to, e.end);
    }
  }
  std::vector<ResourceHold> holds;
  holds.reserve(by_grant.size());
  for (auto& [key, hold] : by_grant) holds.push_back(hold);
  std::stable_sort(holds.begin(), holds.end(),
                   [](const ResourceHold& a, const ResourceHold& b) { return a.from < b.from; });
  return holds;
}

// The most holds under way at once, and how many holds began while `permits` others
// were (a sweep over the holds' starts and ends; an end at the same instant as a start
// comes first: the resource saw them one after the other).
void count_holders(const std::vector<Event>& events, std::uint32_t permits, CheckResult& result) {
  std::vector<std::pair<Nanos, int>> edges;  // (time, +1 start / -1 end)
  for (const ResourceHold& hold : resource_holds(events)) {
    edges.emplace_back(hold.from, +1);
    edges.emplace_back(hold.to, -1);
  }
  std::sort(edges.begin(), edges.end());
  long under_way = 0;
  for (const auto& [time, step] : edges) {
    if (step > 0 && under_way >= static_cast<long>(permits)) ++result.over_permits;
    under_way += step;
    result.most_holders = std::max(result.most_holders, under_way);
  }
}

std::vector<Overlap> find_overlaps(const std::vector<Event>& events) {
  const std::vector<ResourceHold> holds = resource_holds(events);
  std::vector<Overlap> overlaps;
  for (std::size_t i = 0; i < holds.size(); ++i) {
    // Sorted by start: once a later hold starts at or after this one's end, none after
    // it can overlap this one.
    for (std::size_t j = i + 1; j < holds.size() && holds[j].from < holds[i].to; ++j) {
      const Nanos from = std::max(holds[i].from, holds[j].from);
      const Nanos to = std::min(holds[i].to, holds[j].to);
      if (to <= from) continue;
      overlaps.push_back({.client_a = holds[i].grant.client,
                          .client_b = holds[j].grant.client,
                          .token_a = holds[i].grant.token,
                          .token_b = holds[j].grant.token,
                          .from = from,
                          .to = to});
    }
  }
  return overlaps;
}

long count_stale_accepted(const std::vector<Event>& events) {
  std::vector<const Event*> writes;
  for (const Event& e : events) {
    if (e.kind == EventKind::write && e.accepted) writes.push_back(&e);
  }
  std::stable_sort(writes.begin(), writes.end(),
                   [](const Event* a, const Event* b) { return a->start < b->start; });
  // The highest accepted token so far and the clients whose grants carried it: a
  // different grant with the same token differs only in its client.
  bool any = false;
  std::uint64_t highest = 0;
  std::set<int> highest_clients;
  long stale = 0;
  for (const Event* w : writes) {
    if (any && (w->token < highest ||
                (w->token == highest && std::any_of(highest_clients.begin(), highest_clients.end(),
                                                    [w](int c) { return c != w->client; })))) {
      ++stale;
    }
    if (!any || w->token > highest) {
      any = true;
      highest = w->token;
      highest_clients.clear();
    }
    if (w->token == highest) highest_clients.insert(w->client);
  }
  return stale;
}

long count_tokens_backwards(const std::vector<Event>& events) {
  // Tokens must rise strictly from grant to grant: an equal token given to someone else
  // makes two holders indistinguishable to the fence, and one given again to the same
  // client means the engine forgot a grant. "From grant to grant" is the order the
  // grants certainly happened in: a grant must carry a higher token than every grant
  // told to its client before it asked (its client's last request; the grant itself
  // when the history has none). Two acquires under way at once were granted in an order
  // their clients cannot see: a client starved of the CPU may record the earlier grant
  // after the later one (a loaded run did).
  std::map<int, Nanos> asked;                          // each client's last request
  std::vector<std::pair<Nanos, std::uint64_t>> told;  // grants so far: time, highest token yet
  long backwards = 0;
  for (const Event& e : events) {
    if (e.kind == EventKind::request) asked[e.client] = e.time;
    if (e.kind != EventKind::grant) continue;
    const auto request = asked.find(e.client);
    const Nanos since = request != asked.end() ? request->second : e.time;
    // The grants told before `since` (`told` is in time order, its tokens a running max).
    const auto before = std::lower_bound(told.begin(), told.end(), since,
                                         [](const auto& t, Nanos at) { return t.first < at; });
    if (before != told.begin() && std::prev(before)->second >= e.token) ++backwards;
    told.emplace_back(e.time, told.empty() ? e.token : std::max(told.back().second, e.token));
    asked.erase(e.client);  // its next grant answers its next request
  }
  return backwards;
}

// The hold `client` had at `time` by its own events, or nullptr. A hold ends at its
// release, lost notice or the client's death; an end at `time` itself still counts as
// held (a kill and the death it causes may carry one timestamp).
const ClientHold* held_at(const std::vector<ClientHold>& holds, int client, Nanos time) {
  const ClientHold* found = nullptr;
  for (const ClientHold& h : holds) {
    if (h.client != client || h.granted > time) continue;
    if (std::min({h.released, h.lost, h.died}) >= time) found = &h;
  }
  return found;
}

// The time of the first grant to a client other than `client` at or after `time`
// (`inclusive`) or strictly after it; kNever for none. `grants` is in time order.
Nanos next_grant(const std::vector<const Event*>& grants, int client, Nanos time, bool inclusive) {
  auto it = inclusive ? std::lower_bound(grants.begin(), grants.end(), time,
                                         [](const Event* g, Nanos t) { return g->time < t; })
                      : std::upper_bound(grants.begin(), grants.end(), time,
                                         [](Nanos t, const Event* g) { return t < g->time; });
  for (; it != grants.end(); ++it) {
    if ((*it)->client != client) return (*it)->time;
  }
  return kNever;
}

void judge_recovery(const std::vector<Event>& events, const std::vector<ClientHold>& holds,
                    const std::vector<const Event*>& grants, CheckResult& result) {
  struct Incident {
    int client;
    Nanos start;
  };
  std::vector<Incident> incidents;
  // Faults on a holder, by the hold they hit: a death of the same hold later on is the
  // same incident (the kill-holder fault's own effect), not a second one.
  std::multimap<const ClientHold*, Nanos> fault_on;
  for (const Event& e : events) {
    if (e.kind != EventKind::fault || e.client < 0) continue;
    if (const ClientHold* hold = held_at(holds, e.client, e.start)) {
      incidents.push_back({e.client, e.start});
      fault_on.emplace(hold, e.start);
    }
  }
  for (const Event& e : events) {
    if (e.kind != EventKind::death) continue;
    const ClientHold* hold = held_at(holds, e.client, e.time);
    if (hold == nullptr) continue;
    auto [first, last] = fault_on.equal_range(hold);
    const bool covered =
        std::any_of(first, last, [&e](const auto& fault) { return fault.second <= e.time; });
    if (!covered) incidents.push_back({e.client, e.time});
  }
  std::stable_sort(incidents.begin(), incidents.end(),
                   [](const Incident& a, const Incident& b) { return a.start < b.start; });

  for (const Incident& incident : incidents) {
    const Nanos next = next_grant(grants, incident.client, incident.start, true);
    if (next == kNever) {
      ++result.recoveries_unfinished;
      continue;
    }
    result.recoveries.push_back(next - incident.start);
    result.max_recovery = std::max(result.max_recovery, next - incident.start);
  }
}

void judge_server_recovery(const std::vector<Event>& events,
                           const std::vector<const Event*>& grants, CheckResult& result) {
  for (const Event& e : events) {
    if (e.kind != EventKind::fault || e.client >= 0) continue;
    const Nanos next = next_grant(grants, -1, e.start, false);
    if (next == kNever) {
      ++result.server_recoveries_unfinished;
      continue;
    }
    result.server_recoveries.push_back(next - e.start);
    result.max_server_recovery = std::max(result.max_server_recovery, next - e.start);
  }
}

void judge_losses(const std::vector<ClientHold>& holds, const std::vector<const Event*>& grants,
                  CheckResult& result) {
  for (const ClientHold& g : holds) {
    // The first grant to another client after g: a later one can only find g ended too.
    const Nanos next = next_grant(grants, g.client, g.granted, false);
    if (next == kNever) continue;
    // A lost notice does not end the hold here: whether it came in time is the question.
    // A release or death before the other grant does.
    if (std::min(g.released, g.died) <= next) continue;
    if (g.lost <= next) {
      ++result.lost_told;
    } else {
      ++result.lost_untold;
    }
  }
}

long count_waits_unfinished(const std::vector<Event>& events, Nanos run_end) {
  std::map<int, std::vector<Nanos>> pending;  // unanswered requests by client
  std::set<int> dead;
  for (const Event& e : events) {
    switch (e.kind) {
      case EventKind::request:
        pending[e.client].push_back(e.time);
        break;
      case EventKind::grant:
      case EventKind::timeout:
      case EventKind::error:
        pending[e.client].clear();
        break;
      case EventKind::death:
        dead.insert(e.client);
        break;
      default:
        break;
    }
  }
  long unfinished = 0;
  for (const auto& [client, requests] : pending) {
    if (dead.contains(client)) continue;
    for (Nanos time : requests) {
      if (run_end <= 0 || time < run_end) ++unfinished;
    }
  }
  return unfinished;
}

std::string ms(Nanos nanos) {
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%.1f ms", static_cast<double>(nanos) / 1e6);
  return buffer;
}

std::string line(const char* verdict, const char* name, const std::string& detail) {
  // Every name fits the column: the longest is "waits_unfinished".
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%-4s  %-16s  ", verdict, name);
  return buffer + detail;
}

const char* verdict(bool ok) { return ok ? "PASS" : "FAIL"; }

}  // namespace

CheckResult check(const std::vector<Event>& history, const CheckOptions& options) {
  const std::vector<Event> events = sorted_by_time(history);
  CheckResult result;
  for (const Event& e : events) {
    if (e.kind == EventKind::grant) ++result.grants;
    if (e.kind == EventKind::write) ++result.writes;
    if (e.kind == EventKind::write && !e.accepted) ++result.writes_rejected;
    if (e.kind == EventKind::fault) ++result.faults;
  }
  if (options.permits > 0) {
    count_holders(events, options.permits, result);
  } else {
    result.overlaps = find_overlaps(events);
  }
  result.stale_accepted = count_stale_accepted(events);
  result.tokens_backwards = count_tokens_backwards(events);
  std::vector<const Event*> grants;
  for (const Event& e : events) {
    if (e.kind == EventKind::grant) grants.push_back(&e);
  }
  const std::vector<ClientHold> holds = client_holds(events);
  judge_recovery(events, holds, grants, result);
  judge_server_recovery(events, grants, result);
  judge_losses(holds, grants, result);
  result.waits_unfinished = count_waits_unfinished(events, options.run_end);
  return result;
}

std::vector<std::string> CheckResult::summary(const CheckOptions& options) const {
  std::vector<std::string> lines;
  lines.push_back(line("INFO", "run",
                       std::to_string(grants) + " grants, " + std::to_string(writes) + " writes (" +
                           std::to_string(writes_rejected) + " rejected), " +
                           std::to_string(faults) + " faults"));

  std::string overlap_detail = std::to_string(overlaps.size());
  if (!overlaps.empty()) {
    const Overlap& longest = *std::max_element(
        overlaps.begin(), overlaps.end(),
        [](const Overlap& a, const Overlap& b) { return a.to - a.from < b.to - b.from; });
    overlap_detail += ", longest " + ms(longest.to - longest.from) + " (client " +
                      std::to_string(longest.client_a) + " token " +
                      std::to_string(longest.token_a) + " / client " +
                      std::to_string(longest.client_b) + " token " +
                      std::to_string(longest.token_b) + ")";
  }
  const bool semaphore = options.permits > 0;
  if (semaphore) {
    lines.push_back(line("INFO", "holders",
                         "at most " + std::to_string(most_holders) + " at once of " +
                             std::to_string(options.permits) + " permits; " +
                             std::to_string(over_permits) + " holds began beyond them"));
  } else {
    lines.push_back(line("INFO", "overlaps", overlap_detail));
  }

  const char* not_judged = " (not judged: the engine does not claim fencing)";
  const bool stale_judged = options.fenced && !semaphore;
  lines.push_back(line(stale_judged ? verdict(stale_accepted == 0) : "INFO", "stale_accepted",
                       std::to_string(stale_accepted) + " of " +
                           std::to_string(writes - writes_rejected) + " accepted writes" +
                           (stale_judged ? ""
                            : semaphore  ? " (not judged: a semaphore's holders write at once)"
                                         : not_judged)));
  // A semaphore's grants overlap, so the order in which its clients record them is not
  // the order in which the backend made them.
  const bool tokens_judged = options.fenced && !semaphore;
  lines.push_back(line(tokens_judged ? verdict(tokens_backwards == 0) : "INFO", "tokens_backwards",
                       std::to_string(tokens_backwards) + " of " + std::to_string(grants) +
                           " grants" +
                           (tokens_judged ? ""
                            : semaphore   ? " (not judged: concurrent grants are recorded in "
                                            "no particular order)"
                                          : not_judged)));

  std::string recovery_detail;
  if (recoveries.empty() && recoveries_unfinished == 0) {
    recovery_detail = "no fault hit a holder";
  } else {
    recovery_detail = "max " + ms(max_recovery) + " over " + std::to_string(recoveries.size()) +
                      " faults or deaths of a holder, bound " + ms(options.recovery_bound);
    if (recoveries_unfinished > 0) {
      recovery_detail +=
          "; " + std::to_string(recoveries_unfinished) + " with no later grant to another client";
    }
  }
  lines.push_back(
      line(verdict(max_recovery <= options.recovery_bound), "recovery", recovery_detail));

  if (!server_recoveries.empty() || server_recoveries_unfinished > 0) {
    std::string detail = "max " + ms(max_server_recovery) + " over " +
                         std::to_string(server_recoveries.size()) +
                         " backend faults (from the fault to the next grant)";
    if (server_recoveries_unfinished > 0) {
      detail += "; " + std::to_string(server_recoveries_unfinished) + " with no later grant";
    }
    lines.push_back(line("INFO", "server_recovery", detail));
  }
  lines.push_back(line("INFO", "lost",
                       semaphore ? std::string("not judged: other holders are not successors")
                                 : "told " + std::to_string(lost_told) + ", untold " +
                                       std::to_string(lost_untold) +
                                       " (holders superseded by another client's grant)"));
  lines.push_back(line(verdict(waits_unfinished == 0), "waits_unfinished",
                       std::to_string(waits_unfinished) + " requests never answered"));
  return lines;
}

bool CheckResult::passed(const CheckOptions& options) const {
  if (options.fenced && options.permits == 0 &&
      (stale_accepted != 0 || tokens_backwards != 0)) {
    return false;
  }
  return max_recovery <= options.recovery_bound && waits_unfinished == 0;
}

}  // namespace warden::torture

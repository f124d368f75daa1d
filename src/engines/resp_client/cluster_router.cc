#include "engines/resp_client/cluster_router.h"

#include <algorithm>
#include <cctype>
#include <thread>
#include <utility>

#include "core/uri.h"
#include "engines/resp_client/backoff.h"
#include "warden/error.h"

namespace warden::engines::resp_client {
namespace {

// Rounds of redirects one call follows before it gives up (a slot that keeps moving, a
// map that disagrees with itself): far more than a migration or a failover needs.
constexpr int kMaxRounds = 32;

// The pause before a TRYAGAIN or CLUSTERDOWN is asked again: short, as a slot's keys
// move in milliseconds, growing while the cluster stays unsettled.
constexpr RetryPolicy kUnsettledPause{RetryPolicy::Kind::exponential, std::chrono::milliseconds(5),
                                      std::chrono::milliseconds(100), 2.0, 0.2};

std::string upper(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string seeds_text(const std::vector<Endpoint>& seeds) {
  std::string out = "cluster ";
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    if (i > 0) out += ',';
    out += seeds[i].to_string();
  }
  return out;
}

}  // namespace

std::uint16_t command_slot(const Command& command) {
  if (command.size() < 2) {
    throw Error(Errc::internal,
                "cluster routing: '" + (command.empty() ? "" : command[0]) + "' names no key");
  }
  const std::string name = upper(command[0]);
  if (name == "EVAL" || name == "EVALSHA") {
    const auto keys =
        command.size() >= 3 ? core::parse_int_in_range(command[2], 1, 1'000'000) : std::nullopt;
    if (!keys || command.size() < 4) {
      throw Error(Errc::internal, "cluster routing: a script call with no keys");
    }
    return key_slot(command[3]);
  }
  if (name == "MULTI" || name == "EXEC" || name == "WAIT" || name == "PING" || name == "ASKING") {
    throw Error(Errc::internal, "cluster routing: '" + command[0] + "' names no key");
  }
  return key_slot(command[1]);
}

ClusterRouter::ClusterRouter(ClusterOptions options)
    : options_(std::move(options)),
      tls_(options_.node.tls.enabled
               ? TlsContext::create(options_.node.tls, seeds_text(options_.seeds))
               : nullptr),
      description_(seeds_text(options_.seeds)) {}

SlotMap ClusterRouter::read_map(const Endpoint& endpoint, Clock::time_point until) {
  const auto reply_by = std::min(until, Clock::now() + options_.op_timeout);
  ConnectOptions options = node_options(endpoint);
  options.timeout = std::max(std::chrono::milliseconds(1),
                             std::min(options.timeout, std::chrono::ceil<std::chrono::milliseconds>(
                                                           reply_by - Clock::now())));
  const auto conn = Connection::open(options, tls_);
  const std::string_view args[] = {"CLUSTER", "SLOTS"};
  const Reply reply = conn->command(args, reply_by);
  if (reply.is_error()) {
    if (reply.text.find("cluster support disabled") != std::string::npos) {
      throw Error(Errc::unavailable, endpoint.to_string() +
                                         " is not in cluster mode (cluster support disabled); "
                                         "for one Redis server use redis://");
    }
    throw reply_error(reply, "CLUSTER SLOTS on " + endpoint.to_string());
  }
  const auto ranges = parse_cluster_slots(reply, endpoint.host);
  if (ranges.empty()) {
    throw Error(Errc::unavailable, endpoint.to_string() + " knows no master serving any slot");
  }
  return SlotMap(ranges);
}

void ClusterRouter::refresh(Clock::time_point until) {
  // The masters met so far first (they know the cluster as it is now), then the seeds.
  std::vector<Endpoint> candidates = masters();
  for (const Endpoint& seed : options_.seeds) {
    if (std::find(candidates.begin(), candidates.end(), seed) == candidates.end()) {
      candidates.push_back(seed);
    }
  }
  std::string why;
  bool all_refused = true;
  for (const Endpoint& endpoint : candidates) {
    if (Clock::now() >= until) {
      why += (why.empty() ? "" : "; ") + std::string("no time left to ask ") + endpoint.to_string();
      all_refused = false;
      break;
    }
    try {
      SlotMap map = read_map(endpoint, until);
      std::lock_guard lock(mu_);
      map_ = std::move(map);
      last_refresh_ = Clock::now();
      return;
    } catch (const Error& e) {
      if (e.code() != Errc::permission_denied) all_refused = false;
      why += (why.empty() ? "" : "; ") + std::string(e.what());
    }
  }
  {
    std::lock_guard lock(mu_);
    last_refresh_ = Clock::now();
  }
  throw Error(all_refused ? Errc::permission_denied : Errc::unavailable,
              description_ + ": no node gave the slot map (" + why + ")");
}

void ClusterRouter::refresh_soon(Clock::time_point until) {
  {
    std::lock_guard lock(mu_);
    if (Clock::now() - last_refresh_ < kRefreshSpacing) return;
    last_refresh_ = Clock::now();
  }
  try {
    refresh(until);
  } catch (const Error&) {
    // The map stays as it was; the next failure asks again.
  }
}

std::optional<Endpoint> ClusterRouter::master_of(std::uint16_t slot, Clock::time_point until) {
  {
    std::lock_guard lock(mu_);
    if (auto endpoint = map_.endpoint_for(slot)) return endpoint;
  }
  refresh_soon(until);
  std::lock_guard lock(mu_);
  return map_.endpoint_for(slot);
}

std::vector<Endpoint> ClusterRouter::masters() {
  std::lock_guard lock(mu_);
  return map_.nodes();
}

ConnectOptions ClusterRouter::node_options(const Endpoint& endpoint) const {
  ConnectOptions out = options_.node;
  out.host = endpoint.host;
  out.port = endpoint.port;
  out.db.reset();  // a cluster has database 0 only
  out.locator.reset();
  return out;
}

ClusterRouter::Node& ClusterRouter::node(const Endpoint& endpoint) {
  auto& slot = nodes_[endpoint];
  if (!slot) {
    slot = std::make_unique<Node>();
    slot->connector = std::make_shared<Connector>(node_options(endpoint), options_.retry, tls_);
    for (std::size_t i = 0; i < std::max<std::size_t>(1, options_.pipelines_per_node); ++i) {
      slot->pipelines.push_back(std::make_unique<Pipeline>(slot->connector, options_.op_timeout));
    }
  }
  return *slot;
}

Pipeline& ClusterRouter::pipeline(const Endpoint& endpoint) {
  std::lock_guard lock(mu_);
  Node& n = node(endpoint);
  return *n.pipelines[n.next++ % n.pipelines.size()];
}

RoundResult ClusterRouter::run_on(const Endpoint& endpoint, std::vector<Command> commands) {
  return pipeline(endpoint).run(std::move(commands));
}

RoundResult ClusterRouter::run(std::vector<Command> commands) {
  const std::size_t n = commands.size();
  const auto deadline = Clock::now() + options_.op_timeout;
  std::vector<std::uint16_t> slots(n);
  for (std::size_t i = 0; i < n; ++i) slots[i] = command_slot(commands[i]);

  RoundResult out;
  out.replies.resize(n);
  bool first_round = true;
  std::vector<std::optional<Endpoint>> asked(n);  // ASK: where to send it this round
  std::vector<Endpoint> sent_to(n);
  std::vector<std::size_t> pending(n);
  for (std::size_t i = 0; i < n; ++i) pending[i] = i;
  Backoff pause(kUnsettledPause);

  for (int round = 1;; ++round) {
    // This round's commands, per node, in their order.
    std::map<Endpoint, std::vector<std::size_t>> by_node;
    for (std::size_t i : pending) {
      std::optional<Endpoint> target = asked[i] ? asked[i] : master_of(slots[i], deadline);
      if (!target) {
        throw Error(Errc::unavailable, description_ + ": no master serves slot " +
                                           std::to_string(slots[i]) + " (the cluster is down)");
      }
      sent_to[i] = *target;
      by_node[*target].push_back(i);
    }
    for (const auto& [endpoint, members] : by_node) {
      std::vector<Command> batch;
      batch.reserve(members.size() * 2);
      for (std::size_t i : members) {
        if (asked[i]) batch.push_back({"ASKING"});
        batch.push_back(commands[i]);
      }
      RoundResult result;
      try {
        result = run_on(endpoint, std::move(batch));
      } catch (const Error&) {
        // A master that is gone: the cluster names its replica once it has promoted
        // one, so the map is read again (within this call's time; the next call reads
        // it otherwise).
        refresh_soon(deadline);
        throw;
      }
      if (first_round) {
        out.sent = out.sent == Clock::time_point{} ? result.sent : std::min(out.sent, result.sent);
      }
      std::size_t r = 0;
      for (std::size_t i : members) {
        if (asked[i]) ++r;  // ASKING's OK
        out.replies[i] = std::move(result.replies.at(r++));
      }
    }
    first_round = false;

    std::vector<std::size_t> again;
    bool moved = false;
    bool unsettled = false;
    for (std::size_t i : pending) {
      asked[i].reset();
      const Reply& reply = out.replies[i];
      if (!reply.is_error()) continue;
      const std::string_view code = reply.error_code();
      if (code == "TRYAGAIN" || code == "CLUSTERDOWN") {
        unsettled = true;
        again.push_back(i);
        continue;
      }
      std::optional<Redirect> redirect = parse_redirect(reply.text);
      if (!redirect) continue;
      if (redirect->host.empty()) redirect->host = sent_to[i].host;
      if (redirect->kind == Redirect::moved) {
        std::lock_guard lock(mu_);
        map_.apply(*redirect);
        moved = true;
      } else {
        asked[i] = redirect->endpoint();
      }
      again.push_back(i);
    }
    if (again.empty()) return out;
    if (round >= kMaxRounds || Clock::now() >= deadline) {
      throw Error(Errc::unavailable, description_ + ": slot " + std::to_string(slots[again[0]]) +
                                         " did not settle within the op timeout (last answer: " +
                                         out.replies[again[0]].text + ")");
    }
    if (moved) refresh_soon(deadline);
    if (unsettled)
      std::this_thread::sleep_until(std::min(deadline, Clock::now() + pause.next_delay()));
    pending = std::move(again);
  }
}

}  // namespace warden::engines::resp_client

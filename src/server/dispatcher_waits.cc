// Tagged waits (docs/protocol.md, WAITS): many waiting acquires on one connection, each
// answered `[tag, reply]` when it resolves, each withdrawn on its own.
#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "server/command_reject.h"
#include "server/dispatcher.h"
#include "server/resp.h"
#include "warden/error.h"

namespace warden::server {
namespace {

// A tag names one request among a connection's; the client picks it.
constexpr std::size_t kMaxTagBytes = 64;

void tagged_reply(std::string& out, std::string_view tag, std::string_view reply) {
  resp::array(out, 2);
  resp::bulk(out, tag);
  out += reply;
}

}  // namespace

void Dispatcher::start_waits(Connection& c, std::span<const std::string_view> args,
                             std::string& reply) {
  arity(args, 1, 1);
  c.waits = true;
  resp::simple(reply, "OK");
}

Dispatcher::Outcome Dispatcher::tagged(Connection& c, ConnId conn, const std::string& cmd,
                                       std::span<const std::string_view> args, Time now,
                                       std::string& reply) {
  // The tag is the last argument (ACQUIRE ... TAG t, WITHDRAW t). A request without one
  // could only be answered untagged, which the client cannot match to anything: it gets
  // one error and the connection closes.
  if (cmd == "PING" && args.size() == 1) {  // untagged: a client's liveness check
    resp::simple(reply, "PONG");
    return Outcome::replied;
  }
  std::string_view tag;
  if (cmd == "ACQUIRE" && args.size() >= 3 && upper(args[args.size() - 2]) == "TAG") {
    tag = args.back();
  } else if (cmd == "WITHDRAW" && args.size() == 2) {
    tag = args[1];
  }
  if (tag.empty() || tag.size() > kMaxTagBytes) {
    ++stats_.errors;
    resp::error(reply, "ERR",
                "a waits connection takes only ACQUIRE ... TAG t, WITHDRAW t, PING and QUIT (t: 1.." +
                    std::to_string(kMaxTagBytes) + " bytes, last)");
    return Outcome::close;
  }
  const std::string t(tag);

  if (cmd == "WITHDRAW") {
    // A request still queued is answered [t, nil] now; one already answered (granted,
    // timed out) or never asked has nothing more to say.
    const auto it = c.tagged.find(t);
    if (it == c.tagged.end()) return Outcome::replied;
    const table::RequestId id = it->second;
    survive(now, [&] {
      if (table_.cancel(id, now)) {
        parked_.erase(id);
        c.tagged.erase(t);
        std::string nil;
        resp::nil(nil);
        tagged_reply(reply, t, nil);
      }
      collect(now);
    });
    return Outcome::replied;
  }

  const auto request = args.first(args.size() - 2);
  std::string answer;
  Outcome outcome = Outcome::replied;
  try {
    // A connection whose user was removed (authorize below) must authenticate again.
    if (!c.authenticated) throw Reject{"NOAUTH", "authentication required"};
    if (c.tagged.contains(t)) {
      throw Reject{"INVALID", "tag '" + t + "' already names a waiting request here"};
    }
    authorize(c, cmd, request);
    outcome = acquire(c, conn, request, now, answer, &t);
  } catch (const Reject& r) {
    ++stats_.errors;
    resp::error(answer, r.code, r.message);
  } catch (const Error& e) {  // a durability failure: nothing was granted
    ++stats_.errors;
    resp::error(answer, "ERR", e.what());
  }
  if (outcome == Outcome::parked) return Outcome::replied;  // answered when it resolves
  if (request.size() > 1) touched(request[1]);
  tagged_reply(reply, t, answer);
  return Outcome::replied;
}

void Dispatcher::withdraw_all(Connection& c, ConnId conn, Time now, bool answer) {
  if (c.tagged.empty()) return;
  // Newest first, as drop_waiters does: each queue loses its back first, so no removal
  // lets another of these requests be granted on the way.
  std::vector<std::pair<table::RequestId, std::string>> queued;
  queued.reserve(c.tagged.size());
  for (const auto& [tag, id] : c.tagged) queued.emplace_back(id, tag);
  std::sort(queued.begin(), queued.end(), std::greater<>());
  for (const auto& entry : queued) {
    const table::RequestId id = entry.first;
    const std::string& tag = entry.second;
    if (!answer) {
      // The connection is going: forgotten first, so that a grant the table makes while
      // applying the time up to the cancel (it may) is given back by collect().
      parked_.erase(id);
      c.tagged.erase(tag);
      survive(now, [&] { table_.cancel(id, now); });
      continue;
    }
    survive(now, [&] {
      if (!table_.cancel(id, now)) return;
      parked_.erase(id);
      c.tagged.erase(tag);
      Wakeup w{conn, {}};
      std::string nil;
      resp::nil(nil);
      tagged_reply(w.reply, tag, nil);
      wakeups_.push_back(std::move(w));
    });
  }
  survive(now, [&] { collect(now); });
}

}  // namespace warden::server

#include "engines/warden/protocol.h"

#include <string>

#include "engines/resp_client/errors.h"
#include "warden/error.h"

namespace warden::engines::wardend {
namespace {

std::string mode_word(Mode mode) { return std::string(to_string(mode)); }

// The grant's owner secret, as wardend checks it; see renew_command.
const std::string& secret_of(const core::GrantRef& grant) {
  const std::string& s = grant.owner;
  if (s.size() != 32 || s.find_first_not_of("0123456789abcdef") != std::string::npos) {
    throw Error(Errc::not_owner,
                "not a grant of a warden:// client: its owner is not a "
                "wardend owner secret");
  }
  return s;
}

// WAIT/FOREVER, UNFAIR and DELAY as ACQUIRE and ACQUIRESET take them; true if the
// request may wait. A deadline at or before `now` makes a try; Clock::time_point::max()
// waits FOREVER; otherwise WAIT is the time left, rounded up to whole milliseconds.
bool add_wait_options(Command& c, Clock::time_point deadline, const LockOptions& options,
                      Clock::time_point now) {
  bool waits = false;
  if (deadline == Clock::time_point::max()) {
    c.push_back("FOREVER");
    waits = true;
  } else if (deadline > now) {
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
    if (ms > kMaxWaitMs) {
      c.push_back("FOREVER");
    } else {
      c.push_back("WAIT");
      c.push_back(std::to_string(ms));
    }
    waits = true;
  }
  if (options.fairness == Fairness::non_fair) c.push_back("UNFAIR");
  if (options.lock_delay.count() > 0) {
    c.push_back("DELAY");
    c.push_back(std::to_string(options.lock_delay.count()));
  }
  return waits;
}

}  // namespace

AcquireCommand acquire_set_command(const core::AcquireSetRequest& request, Clock::time_point now) {
  AcquireCommand out;
  Command& c = out.command;
  c = {"ACQUIRESET", std::to_string(request.options.ttl.count()),
       std::to_string(request.members.size())};
  for (const auto& member : request.members) {
    c.push_back(member.key.joined());
    c.push_back(mode_word(member.mode));
  }
  out.waits = add_wait_options(c, request.deadline, request.options, now);
  std::size_t bytes = 16;                                     // "*N\r\n"
  for (const std::string& arg : c) bytes += arg.size() + 16;  // "$LEN\r\n" ARG "\r\n"
  if (bytes > kMaxRequestBytes) {
    throw Error(Errc::unsupported, "a set of " + std::to_string(request.members.size()) +
                                       " members is too large for one ACQUIRESET");
  }
  return out;
}

AcquireCommand acquire_command(const core::AcquireRequest& request, Clock::time_point now,
                               std::optional<std::uint64_t> revoke_listener) {
  AcquireCommand out;
  Command& c = out.command;
  c = {"ACQUIRE", request.key.joined(), mode_word(request.mode),
       std::to_string(request.options.ttl.count())};
  out.waits = add_wait_options(c, request.deadline, request.options, now);
  if (request.capacity > 0) {
    c.push_back("PERMITS");
    c.push_back(std::to_string(request.permits));
    c.push_back(std::to_string(request.capacity));
  }
  if (!request.value.empty()) {
    c.push_back("VALUE");
    c.push_back(request.value);
  }
  if (revoke_listener) {
    c.push_back("CACHE");
    c.push_back(std::to_string(*revoke_listener));
  }
  return out;
}

Command renew_command(const core::GrantRef& grant) {
  return {"RENEW", grant.key.joined(), std::to_string(grant.token), secret_of(grant),
          std::to_string(grant.ttl.count())};
}

Command proclaim_command(const core::GrantRef& grant, std::string_view value) {
  return {"PROCLAIM", grant.key.joined(), std::to_string(grant.token), secret_of(grant),
          std::string(value)};
}

Command release_command(const core::GrantRef& grant) {
  return {"RELEASE", grant.key.joined(), std::to_string(grant.token), secret_of(grant)};
}

Command check_command(const Sequencer& sequencer) {
  return {"CHECK", sequencer.group + '/' + sequencer.name, mode_word(sequencer.mode),
          std::to_string(sequencer.token)};
}

Command hello_command() { return {"HELLO"}; }

bool is_starting(const Reply& reply) { return reply.error_code() == "STARTING"; }

std::optional<GrantReply> parse_acquire(const Reply& reply, std::string_view context) {
  if (reply.is_nil()) return std::nullopt;
  if (reply.is_error()) throw resp_client::reply_error(reply, context);
  if (!reply.is_array() || reply.elements.size() != 3 || !reply.elements[0].is_integer() ||
      !reply.elements[1].is_integer() || reply.elements[0].integer <= 0 ||
      reply.elements[1].integer < 0 || reply.elements[2].type != Reply::Type::bulk ||
      reply.elements[2].text.size() != 32) {
    throw resp_client::unexpected_reply(reply, context);
  }
  return GrantReply{static_cast<std::uint64_t>(reply.elements[0].integer),
                    std::chrono::microseconds(reply.elements[1].integer), reply.elements[2].text};
}

std::optional<std::vector<GrantReply>> parse_acquire_set(const Reply& reply, std::size_t members,
                                                         std::string_view context) {
  if (reply.is_nil()) return std::nullopt;
  if (reply.is_error()) throw resp_client::reply_error(reply, context);
  if (!reply.is_array() || reply.elements.size() != members) {
    throw resp_client::unexpected_reply(reply, context);
  }
  std::vector<GrantReply> grants;
  grants.reserve(members);
  for (const Reply& element : reply.elements) {
    auto grant = parse_acquire(element, context);
    if (!grant) throw resp_client::unexpected_reply(reply, context);
    grants.push_back(std::move(*grant));
  }
  return grants;
}

bool parse_flag(const Reply& reply, std::string_view context) {
  if (reply.is_error()) throw resp_client::reply_error(reply, context);
  if (!reply.is_integer() || (reply.integer != 0 && reply.integer != 1)) {
    throw resp_client::unexpected_reply(reply, context);
  }
  return reply.integer == 1;
}

std::int64_t check_hello(const Reply& reply, std::string_view endpoint) {
  const std::string where(endpoint);
  if (reply.error_code() == "NOAUTH") {
    throw Error(Errc::permission_denied,
                "wardend at " + where + " requires a password: warden://:PASSWORD@" + where);
  }
  std::string server;
  std::int64_t proto = -1;
  if (reply.is_array()) {
    for (std::size_t i = 0; i + 1 < reply.elements.size(); i += 2) {
      const Reply& key = reply.elements[i];
      const Reply& value = reply.elements[i + 1];
      if (key.text == "server") server = value.text;
      if (key.text == "proto" && value.is_integer()) proto = value.integer;
    }
  }
  if (server != "wardend") {
    throw Error(Errc::invalid_argument,
                where + " is not a wardend server: HELLO answered " + reply.describe());
  }
  if (proto < kProto) {
    throw Error(Errc::unsupported,
                "wardend at " + where + " speaks protocol " + std::to_string(proto) +
                    ", which has no owner secrets (anyone could renew or release a grant); "
                    "this client needs protocol " +
                    std::to_string(kProto) + ": upgrade the server");
  }
  return proto;
}

}  // namespace warden::engines::wardend

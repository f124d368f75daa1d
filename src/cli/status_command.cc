#include "cli/status_command.h"

#include <fmt/core.h>
#include <hiredis.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "bench/resp_connection.h"
#include "cli/exit_codes.h"
#include "cli/failure.h"
#include "cli/print.h"
#include "cli/status_format.h"
#include "core/names.h"
#include "core/uri.h"
#include "engines/warden/cell_locator.h"
#include "warden/client.h"
#include "warden/error.h"

namespace warden::cli {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr auto kStatusTimeout = 5s;

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() < 19 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}


std::string info_text(const std::string& url,
                      const std::vector<std::pair<std::string, std::string>>& fields) {
  std::size_t width = 0;
  for (const auto& [key, value] : fields) width = std::max(width, key.size());
  std::string out = fmt::format("{}\n", url);
  for (const auto& [key, value] : fields) {
    out += fmt::format("  {:<{}}  {}", key, width, value);
    if (key == "rss_bytes" && all_digits(value)) {
      out += fmt::format(" ({:.1f} MiB)", static_cast<double>(std::stoull(value)) / 1048576.0);
    }
    out += "\n";
  }
  return out;
}

json info_json(const std::string& url,
               const std::vector<std::pair<std::string, std::string>>& fields) {
  json info = json::object();
  for (const auto& [key, value] : fields) {
    if (all_digits(value)) {
      info[key] = std::stoull(value);
    } else {
      info[key] = value;
    }
  }
  return json{{"url", url}, {"info", info}};
}

// The INFO of a single wardend, or of a cell's leader: each member asked in turn, and a
// member's -MOVED followed at once to the leader it names.
std::string leader_info(std::string_view url) {
  const std::vector<bench::Endpoint> members = bench::endpoints_of(url);
  if (members.size() == 1) {
    bench::RespConnection conn = bench::RespConnection::open(members[0], kStatusTimeout);
    return bench::expect_text(*conn.command({"INFO"}), "INFO on " + conn.endpoint());
  }
  std::deque<bench::Endpoint> ask(members.begin(), members.end());
  std::size_t budget = 2 * members.size() + 1;  // every member, and as many redirects
  std::string why;
  while (!ask.empty() && budget-- > 0) {
    const bench::Endpoint at = ask.front();
    ask.pop_front();
    try {
      bench::RespConnection conn = bench::RespConnection::open(at, kStatusTimeout);
      const bench::ReplyPtr reply = conn.command({"INFO"});
      if (reply->type != REDIS_REPLY_ERROR) {
        return bench::expect_text(*reply, "INFO on " + conn.endpoint());
      }
      const std::string text(reply->str, reply->len);
      why += "; " + conn.endpoint() + ": " + text;
      if (const auto moved = engines::wardend::moved_to(text)) {
        bench::Endpoint leader = at;
        leader.host = moved->host;
        leader.port = moved->port;
        ask.push_front(leader);
      }
    } catch (const Error& e) {
      why += "; " + std::string(e.what());
    }
  }
  throw Error(Errc::unavailable, "no member of the cell leads" + why);
}

}  // namespace

int status(const StatusOptions& o) {
  std::string url = o.url;
  if (url.empty()) {
    if (const char* env = std::getenv("WARDEN_URL")) url = env;
  }
  if (url.empty()) {
    throw Failure(exit_code::kUsage, "--url", "not given, and WARDEN_URL is not set");
  }
  core::Uri uri;
  try {
    uri = core::Uri::parse(url);
  } catch (const Error& e) {
    throw Failure::from("--url", e);
  }
  if (o.name && o.group.empty()) {
    throw Failure(exit_code::kUsage, "--name", "needs --group");
  }
  if (!o.group.empty()) {
    try {
      core::validate_group(o.group);
      if (o.name) core::validate_name(*o.name);
    } catch (const Error& e) {
      throw Failure::from(
          o.name ? "lock " + printable(o.group + "/" + *o.name) : "group " + printable(o.group), e);
    }
  }
  if (o.group.empty() && uri.scheme != "warden") {
    throw Failure(exit_code::kUsage, "--group",
                  "needed: only a warden:// server (or cell) has INFO to show; give --group "
                  "[--name]");
  }
  const std::string url_text = uri.redacted();

  try {
    if (o.group.empty()) {
      const std::string text = leader_info(url);
      const auto fields = bench::parse_info(text);
      print(o.json ? info_json(url_text, fields).dump() + "\n" : info_text(url_text, fields));
      return exit_code::kOk;
    }
    // Every engine answers through the client: one read, no lock taken.
    ClientOptions options;
    options.op_timeout = kStatusTimeout;
    const Client client = Client::open(url, options);
    if (!o.name) {
      const auto locks = client.list(o.group);
      print(o.json ? group_json(url_text, o.group, locks) : group_text(o.group, locks));
      return exit_code::kOk;
    }
    const LockStatus s = client.inspect(o.group, *o.name);
    print(o.json ? lock_json(url_text, s) : lock_text(s));
    return exit_code::kOk;
  } catch (const Error& e) {
    throw Failure::from("status " + url_text, e);
  }
}

void add_status_command(Commands& commands) {
  auto o = std::make_shared<StatusOptions>();
  CLI::App& app =
      commands.add("status", "Show a lock server's INFO, or one lock's holders and waiters",
                   [o] { return status(*o); });
  app.add_option("--url", o->url, "Lock backend URI, any engine (default: $WARDEN_URL)")
      ->type_name("URL");
  app.add_option("--group", o->group, "Lock group: list its locks, or with --name show one")
      ->type_name("G");
  app.add_option("--name", o->name, "Lock name within the group (needs --group)")->type_name("N");
  app.add_flag("--json", o->json, "Print one JSON object instead of a table");
  app.footer(
      "With --group and --name: that lock's holders, waiters and lock-delay.\n"
      "With --group alone: the group's locks with holder and waiter counts.\n"
      "Without --group (warden:// only): the server's INFO.\n"
      "\n"
      "Every engine answers (mem, warden, redis, redlock, etcd, zk). Holders: mode,\n"
      "fencing token, and milliseconds until the lease runs out unless renewed\n"
      "(session: zk:// ties leases to the session). Waiters, in queue order: mode, and\n"
      "milliseconds until the waiter gives up (none: no deadline, or the backend does\n"
      "not record it; only mem:// and warden:// do). redlock:// has holders only.\n"
      "Lock-delay: milliseconds before an expired lock may be granted again.\n"
      "\n"
      "Exit status: 0 ok; 64 usage error (bad option, URL, group or name); 69 backend\n"
      "unreachable or not answering; 71 unexpected reply; 77 credentials refused.\n");
}

}  // namespace warden::cli

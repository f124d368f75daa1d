#include "cli/status_command.h"

#include <fmt/core.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "cli/bench_resp.h"
#include "cli/exit_codes.h"
#include "cli/failure.h"
#include "core/names.h"
#include "core/uri.h"
#include "warden/error.h"

namespace warden::cli {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr auto kTimeout = 5s;

struct Holder {
  std::string mode;
  long long token = 0;
  long long ttl_left_ms = 0;
};

struct Waiter {
  std::string mode;
  long long deadline_left_ms = -1;  // -1: waits without a deadline
};

struct LockStatus {
  std::vector<Holder> holders;
  std::vector<Waiter> waiters;
  long long delay_left_ms = 0;
};


bool all_digits(const std::string& s) {
  return !s.empty() && s.size() < 19 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string text_of(const redisReply& r) { return std::string(r.str, r.len); }

// INSPECT's reply: "holders" [[mode, token, ms]...] "waiters" [[mode, ms]...]
// "delayed_ms" ms, read by label.
LockStatus parse_inspect(const redisReply& reply, const std::string& what) {
  bench::expect_array(reply, what);
  LockStatus s;
  auto bad = [&] { bench::reject_reply(reply, what); };
  if (reply.elements % 2 != 0) bad();
  for (std::size_t i = 0; i + 1 < reply.elements; i += 2) {
    const redisReply& label = *reply.element[i];
    const redisReply& value = *reply.element[i + 1];
    if (label.type != REDIS_REPLY_STRING && label.type != REDIS_REPLY_STATUS) bad();
    const std::string name = text_of(label);
    if (name == "holders" || name == "waiters") {
      if (value.type != REDIS_REPLY_ARRAY) bad();
      for (std::size_t k = 0; k < value.elements; ++k) {
        const redisReply& e = *value.element[k];
        const std::size_t want = name == "holders" ? 3 : 2;
        if (e.type != REDIS_REPLY_ARRAY || e.elements != want) bad();
        for (std::size_t f = 1; f < want; ++f) {
          if (e.element[f]->type != REDIS_REPLY_INTEGER) bad();
        }
        const std::string mode = bench::expect_text(*e.element[0], what);
        if (name == "holders") {
          s.holders.push_back({mode, e.element[1]->integer, e.element[2]->integer});
        } else {
          s.waiters.push_back({mode, e.element[1]->integer});
        }
      }
    } else if (name == "delayed_ms") {
      s.delay_left_ms = bench::expect_integer(value, what);
    }
  }
  return s;
}

void print(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
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

std::string lock_text(const std::string& key, const LockStatus& s) {
  std::string out = fmt::format("lock {}\n", printable(key));
  if (s.holders.empty() && s.waiters.empty()) out += "  free: no holders, no waiters\n";
  if (!s.holders.empty()) {
    out += fmt::format("  holders ({}):\n    {:<10} {:>20} {:>14}\n", s.holders.size(), "MODE",
                       "TOKEN", "TTL LEFT (ms)");
    for (const Holder& h : s.holders) {
      out += fmt::format("    {:<10} {:>20} {:>14}\n", h.mode, h.token, h.ttl_left_ms);
    }
  }
  if (!s.waiters.empty()) {
    out += fmt::format("  waiters, in queue order ({}):\n    {:<10} {:>19}\n", s.waiters.size(),
                       "MODE", "DEADLINE LEFT (ms)");
    for (const Waiter& w : s.waiters) {
      out += fmt::format(
          "    {:<10} {:>19}\n", w.mode,
          w.deadline_left_ms < 0 ? std::string("none") : std::to_string(w.deadline_left_ms));
    }
  }
  out += fmt::format("  lock-delay left: {} ms\n", s.delay_left_ms);
  return out;
}

json lock_json(const std::string& url, const std::string& key, const LockStatus& s) {
  json holders = json::array();
  for (const Holder& h : s.holders) {
    holders.push_back({{"mode", h.mode}, {"token", h.token}, {"ttl_left_ms", h.ttl_left_ms}});
  }
  json waiters = json::array();
  for (const Waiter& w : s.waiters) {
    waiters.push_back(
        {{"mode", w.mode},
         {"deadline_left_ms", w.deadline_left_ms < 0 ? json(nullptr) : json(w.deadline_left_ms)}});
  }
  return json{{"url", url},
              {"lock", key},
              {"holders", holders},
              {"waiters", waiters},
              {"lock_delay_left_ms", s.delay_left_ms}};
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
  if (uri.scheme != "warden") {
    throw Failure(
        exit_code::kUsage, "--url",
        "warden status supports warden:// only; " + uri.scheme + ":// has no status query yet");
  }
  if (!o.name.empty() && o.group.empty()) {
    throw Failure(exit_code::kUsage, "--name", "needs --group");
  }
  if (!o.group.empty() && o.name.empty()) {
    throw Failure(exit_code::kUsage, "--group",
                  "needs --name (listing every lock of a group is not in the protocol yet)");
  }
  if (!o.group.empty()) {
    try {
      core::validate_group(o.group);
      core::validate_name(o.name);
    } catch (const Error& e) {
      throw Failure::from("lock " + printable(o.group + "/" + o.name), e);
    }
  }
  const std::string url_text = uri.redacted();

  try {
    bench::RespConnection conn = bench::RespConnection::open(bench::endpoint_of(url), kTimeout);
    if (o.group.empty()) {
      const std::string text =
          bench::expect_text(*conn.command({"INFO"}), "INFO on " + conn.endpoint());
      const auto fields = bench::parse_info(text);
      print(o.json ? info_json(url_text, fields).dump() + "\n" : info_text(url_text, fields));
      return exit_code::kOk;
    }
    const std::string key = o.group + "/" + o.name;
    const bench::ReplyPtr reply = conn.command({"INSPECT", key});
    const LockStatus s = parse_inspect(*reply, "INSPECT on " + conn.endpoint());
    print(o.json ? lock_json(url_text, key, s).dump() + "\n" : lock_text(key, s));
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
  app.add_option("--url", o->url, "Lock server URI, warden://HOST:PORT (default: $WARDEN_URL)")
      ->type_name("URL");
  app.add_option("--group", o->group, "Lock group (needs --name)")->type_name("G");
  app.add_option("--name", o->name, "Lock name within the group")->type_name("N");
  app.add_flag("--json", o->json, "Print one JSON object instead of a table");
  app.footer(
      "Without --group: the server's INFO (connections, keys, holders, waiters, ...).\n"
      "With --group and --name: that lock's holders, waiters and lock-delay.\n"
      "\n"
      "Only warden:// servers can be asked for now; any other engine gets exit 64.\n"
      "Listing every lock of a group is not in wardend's protocol yet: give --name.\n"
      "\n"
      "Holders: mode, fencing token, and milliseconds until the lease runs out unless\n"
      "renewed. Waiters, in queue order: mode, and milliseconds until the waiter gives\n"
      "up (none: waits until granted). Lock-delay: milliseconds before an expired lock\n"
      "may be granted again.\n"
      "\n"
      "Exit status: 0 ok; 64 usage error (bad option, URL, group or name, or an engine\n"
      "without status); 69 server unreachable or not answering; 71 unexpected reply;\n"
      "77 credentials refused.\n");
}

}  // namespace warden::cli

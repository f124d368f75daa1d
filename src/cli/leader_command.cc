#include "cli/leader_command.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <thread>

#include "cli/events.h"
#include "cli/exit_codes.h"
#include "cli/failure.h"
#include "cli/hold_options.h"
#include "cli/leader_format.h"
#include "cli/print.h"
#include "core/names.h"
#include "core/uri.h"
#include "warden/client.h"
#include "warden/election.h"
#include "warden/error.h"

namespace warden::cli {
namespace {

using namespace std::chrono_literals;

// Each look at the backend gives up after this; a watch then looks again.
constexpr auto kLookTimeout = 5s;


// Runs Election::observe on a helper thread, printing each change with `show`, until a
// signal arrives. SIGINT and SIGTERM are how a watch is meant to end: 0.
int watch(const Election& election, const std::function<void(const std::optional<Leader>&)>& show,
          Events& events, const std::string& what) {
  std::exception_ptr error;
  std::atomic<bool> done{false};
  std::jthread observer([&](std::stop_token stop) {
    try {
      election.observe(show, std::move(stop));
    } catch (...) {
      error = std::current_exception();
    }
    done = true;
    events.wake();
  });
  for (;;) {
    const Events::Event event = events.wait(Clock::time_point::max());
    if (event.kind == Events::Event::Kind::signal && event.signal != SIGCHLD) {
      observer.request_stop();
      observer.join();
      if (event.signal == SIGINT || event.signal == SIGTERM) return exit_code::kOk;
      throw Failure(exit_code::kSignalBase + event.signal, what,
                    "interrupted by " + signal_name(event.signal));
    }
    if (event.kind == Events::Event::Kind::woken && done) break;
  }
  observer.join();
  // observe() returns only when stopped, so the helper ended by an error.
  try {
    if (error) std::rethrow_exception(error);
  } catch (const Error& e) {
    throw Failure::from(what, e);
  }
  throw Failure(exit_code::kInternal, what, "stopped watching without a signal");
}

}  // namespace

int leader(const LeaderOptions& o) {
  const std::string url = url_or_environment(o.url);
  std::string url_text;
  try {
    url_text = core::Uri::parse(url).redacted();
  } catch (const Error& e) {
    throw Failure::from("--url", e);
  }
  const std::string election_text = printable(o.group + '/' + o.name);
  try {
    core::validate_group(o.group);
    core::validate_name(o.name);
  } catch (const Error& e) {
    throw Failure::from("election " + election_text, e);
  }

  // Before Client::open, for a watch: the client's threads and the observer must
  // inherit the blocked signal mask. A single look keeps the default signal actions.
  std::optional<Events> events;
  if (o.watch) events.emplace();

  const std::string what = "leader " + url_text;
  ClientOptions options;
  options.op_timeout = kLookTimeout;
  const Client client = [&] {
    try {
      return Client::open(url, options);
    } catch (const Error& e) {
      throw Failure::from(what, e);
    }
  }();
  const Election election = [&] {
    try {
      return client.election(o.group, o.name);
    } catch (const Error& e) {
      // unsupported (an engine without elections) is a usage error, as for `elect`.
      throw Failure::from("election " + election_text, e);
    }
  }();
  auto show = [&](const std::optional<Leader>& leader) {
    print(o.json ? leader_json(url_text, o.group, o.name, leader)
                 : leader_text(o.group, o.name, leader));
  };

  // One look first, also for a watch: observe() retries a backend that does not answer
  // in silence, and a watch that never printed anything would not say why.
  std::optional<Leader> now;
  try {
    now = election.leader();
  } catch (const Error& e) {
    throw Failure::from(what, e);
  }
  if (!o.watch) {
    show(now);
    return exit_code::kOk;
  }
  return watch(election, show, *events, what);
}

void add_leader_command(Commands& commands) {
  auto o = std::make_shared<LeaderOptions>();
  CLI::App& app = commands.add("leader", "Show who leads an election, once or as it changes",
                               [o] { return leader(*o); });
  app.add_option("--url", o->url, "Lock service URI (default: $WARDEN_URL)")->type_name("URL");
  app.add_option("--group", o->group, "Election group")->type_name("G")->required();
  app.add_option("--name", o->name, "Election name within the group")->type_name("N")->required();
  app.add_flag("--watch", o->watch,
               "Print the leader now and again on every change, until SIGINT or SIGTERM");
  app.add_flag("--json", o->json, "Print one JSON object per line instead of text");
  app.footer(
      "Prints one line: \"election G/N: term T, leader VALUE\", or \"election G/N: no\n"
      "leader\" when nobody leads (not an error). VALUE is what the leader proclaimed\n"
      "(warden elect --value); T its term, the fencing token every new leader gets\n"
      "higher. With --json: {\"url\", \"election\", \"leader\": {\"value\", \"term\"}}, or\n"
      "\"leader\": null.\n"
      "\n"
      "With --watch, one such line (or JSON object) per change, in term order: a new\n"
      "leader, a new value, or nobody. The backend is looked at every 100ms; changes\n"
      "that undo each other between two looks may be missed, the last one never is.\n"
      "\n"
      "Engines with elections: warden://, mem:// (in-process: tests only).\n"
      "\n"
      "Exit status: 0 ok (also with no leader, and a watch ended by SIGINT or SIGTERM);\n"
      "64 usage error (bad option, URL, group or name, or an engine without elections);\n"
      "69 backend unreachable or not answering; 71 unexpected reply; 77 credentials\n"
      "refused; 128+N a watch ended by signal N (SIGHUP, SIGQUIT).\n");
}

}  // namespace warden::cli

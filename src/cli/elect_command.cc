#include "cli/elect_command.h"

#include <unistd.h>

#include <chrono>
#include <memory>
#include <span>

#include "cli/acquire.h"
#include "cli/duration.h"
#include "cli/events.h"
#include "cli/exit_codes.h"
#include "cli/failure.h"
#include "cli/hold_options.h"
#include "core/names.h"
#include "warden/client.h"
#include "warden/election.h"
#include "warden/error.h"

namespace warden::cli {
namespace {

// Everything elect() needs, checked before any I/O so that bad input changes nothing.
struct ElectPlan {
  std::string url;
  std::string value;
  std::optional<std::chrono::nanoseconds> wait;  // nullopt: forever
  LockOptions lock;
  LostPolicy lost;
};

ElectPlan make_plan(const ElectOptions& options, const std::string& election_text) {
  ElectPlan plan;
  plan.url = url_or_environment(options.url);
  plan.wait = wait_option(options.wait);
  plan.lock.ttl = millis_option("--ttl", options.ttl);
  plan.lost = lost_policy_option(options.on_lost, options.kill_after);
  plan.lost.meaning = "another candidate may lead now";
  plan.value = options.value ? *options.value : default_leader_value();
  // The library checks these too, but only once connected.
  try {
    core::validate_group(options.group);
    core::validate_name(options.name);
    core::validate_lock_options(plan.lock);
  } catch (const Error& e) {
    throw Failure::from("election " + election_text, e);
  }
  try {
    core::validate_leader_value(plan.value);
  } catch (const Error& e) {
    throw Failure::from("--value", e);
  }
  return plan;
}

Election open_election(const Client& client, const ElectOptions& options, const ElectPlan& plan,
                       const std::string& election_text) {
  try {
    return client.election(options.group, options.name, plan.lock);
  } catch (const Error& e) {
    // unsupported (an engine without elections) is a usage error, as for --permits.
    throw Failure::from("election " + election_text, e);
  }
}

}  // namespace

std::string default_leader_value() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') {
    return "unknown-host:" + std::to_string(getpid());
  }
  return std::string(host) + ':' + std::to_string(getpid());
}

int elect(const ElectOptions& options) {
  const std::string election_text = printable(options.group + '/' + options.name);
  const ElectPlan plan = make_plan(options, election_text);

  // Before Client::open: the watchdog thread must inherit the blocked signal mask.
  Events events;

  Client client = [&] {
    try {
      return Client::open(plan.url);
    } catch (const Error& e) {
      throw Failure::from("connect", e);
    }
  }();
  Election election = open_election(client, options, plan, election_text);

  // Owned here, outside the campaign's helper thread: a leadership won just as a signal
  // arrived is resigned by its destructor once that thread is joined.
  Leadership leadership;
  const Wait wait = plan.wait ? Wait::up_to(*plan.wait) : Wait::forever();
  acquire_interruptibly(
      "campaign for " + election_text,
      [&](std::stop_token stop) {
        leadership = election.campaign(plan.value, wait, std::move(stop));
        return leadership.valid();
      },
      timeout_why(plan.wait), events);
  if (options.verbose) {
    print_diagnostic("leading " + election_text + ", term " + std::to_string(leadership.term()) +
                     ", value " + printable(leadership.value()) + ", ttl " +
                     format_duration(plan.lock.ttl) + ", " + client.uri());
  }

  const int status =
      run_supervised(options.command, std::span(&leadership.lease(), 1), events, plan.lost);

  try {
    leadership.resign();
  } catch (const Error& e) {
    // CMD is done; its status is still the answer. The leadership ends by itself within
    // the TTL once this process (and its watchdog) is gone.
    print_diagnostic("resign " + election_text + ": " + e.what() +
                     "; the leadership ends by itself within --ttl");
  }
  return status;
}

void add_elect_command(Commands& commands) {
  auto options = std::make_shared<ElectOptions>();
  CLI::App& app = commands.add("elect", "Run a command while leading an election",
                               [options] { return elect(*options); });
  app.description(
      "Campaign in an election, run CMD while leading it, resign when CMD exits; exit with "
      "CMD's status");

  app.add_option("--url", options->url, "Lock service URI (default: $WARDEN_URL); see below")
      ->type_name("URL");
  app.add_option("--group", options->group, "Election group: 1..64 of [A-Za-z0-9._-]")
      ->type_name("G")
      ->required();
  app.add_option("--name", options->name, "Election name within the group: 1..512 bytes")
      ->type_name("N")
      ->required();
  app.add_option("--value", options->value,
                 "What the leader proclaims, shown by `warden leader` (0..4096 bytes) "
                 "[default: HOST:PID]")
      ->type_name("V");
  app.add_option("--wait", options->wait,
                 "Give up after D without leading (exit 75); 0 = try once [default: forever]")
      ->type_name("D");
  app.add_option("--ttl", options->ttl,
                 "Lease length: leadership ends D after renewals stop (10ms..168h)")
      ->type_name("D")
      ->capture_default_str();
  app.add_flag("-v,--verbose", options->verbose,
               "Say on stderr what was won: term, value, TTL, URL");
  app.add_option("--on-lost", options->on_lost,
                 "If the leadership is lost: term, kill or ignore (see below); exit 70")
      ->type_name("ACTION")
      ->capture_default_str();
  app.add_option("--kill-after", options->kill_after,
                 "With --on-lost term: SIGKILL CMD D after SIGTERM; 0 = at once")
      ->type_name("D")
      ->capture_default_str();
  app.add_option("CMD", options->command, "The command to run and its arguments, after --")
      ->type_name("")
      ->required();
  // Everything from CMD on belongs to CMD, even words that look like warden options.
  app.positionals_at_end();

  app.footer(
      std::string("Durations (D): a number with a unit, ns us ms s m h, combinable: 500ms, "
                  "30s, 1m30s.\n"
                  "\n"
                  "URLs: an engine with elections: warden://HOST:PORT, or mem:// (in-process:\n"
                  "tests only). Other engines refuse (exit 64).\n"
                  "\n"
                  "Candidates queue as an exclusive lock's waiters do; one leads at a time. The\n"
                  "value (default: this host's name and warden's process id, HOST:PID) is what\n"
                  "`warden leader` shows while this process leads.\n"
                  "\n"
                  "CMD runs, as the leader, with these environment variables:\n"
                  "  WARDEN_TOKEN      the leader's term (decimal): higher for every new leader;\n"
                  "                    pass it to what CMD writes, so an old leader's late\n"
                  "                    write can be rejected\n"
                  "  WARDEN_SEQUENCER  the leadership's sequencer, group/name:exclusive:term\n"
                  "\n"
                  "warden renews the leadership while CMD runs and resigns it once CMD has\n"
                  "exited, so the next candidate leads. SIGINT, SIGTERM, SIGHUP and SIGQUIT are\n"
                  "passed on to CMD; one that arrives while warden waits to lead ends the wait\n"
                  "(exit 128+N) and the campaign leaves no trace.\n"
                  "\n"
                  "If the leadership is lost (renewals failed), another candidate may lead while\n"
                  "CMD still runs. --on-lost says what happens to CMD then: term = SIGTERM, then\n"
                  "SIGKILL after --kill-after; kill = SIGKILL at once; ignore = a warning only.\n"
                  "warden exits 70 in every case.\n"
                  "\n"
                  "Example:\n"
                  "  warden elect --url warden://127.0.0.1:7380 --group cron --name scheduler "
                  "-- ./scheduler\n"
                  "\n") +
      std::string(kElectExitCodesHelp));
}

}  // namespace warden::cli

#include "cli/run_command.h"

#include <chrono>
#include <memory>
#include <optional>

#include "cli/acquire.h"
#include "cli/duration.h"
#include "cli/events.h"
#include "cli/exit_codes.h"
#include "cli/failure.h"
#include "cli/hold_options.h"
#include "warden/client.h"
#include "warden/error.h"

namespace warden::cli {
namespace {

// Everything run() needs, checked before any I/O so that bad input changes nothing.
struct RunPlan {
  std::string url;
  Mode mode = Mode::exclusive;
  std::optional<std::chrono::nanoseconds> wait;  // nullopt: forever
  // Kept apart from client.lock_defaults so that bad lock options are reported as a
  // problem of the lock, not of the connection.
  LockOptions lock;
  ClientOptions client;
  LostPolicy lost;
};

Fairness fairness_option(const RunOptions& options) {
  Fairness fairness = Fairness::automatic;
  if (options.fairness == "automatic") {
    fairness = Fairness::automatic;
  } else if (options.fairness == "fifo") {
    fairness = Fairness::fifo;
  } else if (options.fairness == "non-fair") {
    fairness = Fairness::non_fair;
  } else {
    throw Failure(exit_code::kUsage, "--fairness",
                  "unknown fairness \"" + printable(options.fairness) +
                      "\" (one of automatic, fifo, non-fair)");
  }
  if (options.unfair) {
    if (fairness == Fairness::fifo) {
      throw Failure(exit_code::kUsage, "--unfair", "contradicts --fairness fifo");
    }
    fairness = Fairness::non_fair;
  }
  return fairness;
}

RunPlan make_plan(const RunOptions& options) {
  RunPlan plan;
  plan.url = url_or_environment(options.url);
  plan.mode = options.shared ? Mode::shared : Mode::exclusive;
  if (options.names.size() > 1 && options.permits > 0) {
    throw Failure(exit_code::kUsage, "--permits",
                  "contradicts a repeated --name: a semaphore has one name");
  }
  if (options.permits > 0 && options.shared) {
    throw Failure(exit_code::kUsage, "--shared",
                  "contradicts --permits: a semaphore's permit is neither shared nor exclusive");
  }
  plan.wait = wait_option(options.wait);

  plan.lock.ttl = millis_option("--ttl", options.ttl);
  plan.lock.lock_delay = millis_option("--lock-delay", options.lock_delay);
  plan.lock.fairness = fairness_option(options);
  plan.client.watchdog = !options.no_renew;
  plan.lost = lost_policy_option(options.on_lost, options.kill_after);
  return plan;
}

// "G/N", or "G/{A,B}" for a multi-lock's names as given.
std::string locks_text(const RunOptions& options) {
  if (options.names.size() == 1) return printable(options.group + '/' + options.names[0]);
  std::string text = options.group + "/{";
  for (std::size_t i = 0; i < options.names.size(); ++i) {
    text += (i > 0 ? "," : "") + options.names[i];
  }
  return printable(text + '}');
}

std::vector<Lease> acquire_lock(Client& client, const RunOptions& options, const RunPlan& plan,
                                Wait wait, Events& events) {
  Lock lock = [&] {
    try {
      return client.lock(options.group, options.names[0], plan.lock);
    } catch (const Error& e) {
      throw Failure::from("lock " + locks_text(options), e);
    }
  }();
  return acquire_interruptibly(lock, plan.mode, wait, timeout_why(plan.wait), events);
}

std::vector<Lease> acquire_permit(Client& client, const RunOptions& options, const RunPlan& plan,
                                  Wait wait, Events& events) {
  const std::string text = locks_text(options);
  Semaphore semaphore = [&] {
    try {
      return client.semaphore(options.group, options.names[0], options.permits, plan.lock);
    } catch (const Error& e) {
      throw Failure::from("semaphore " + text, e);
    }
  }();
  return acquire_leases_interruptibly(
      "acquire a permit of " + text,
      [&](std::stop_token stop) {
        std::vector<Lease> leases;
        if (Lease lease = semaphore.acquire(1, wait, std::move(stop))) {
          leases.push_back(std::move(lease));
        }
        return leases;
      },
      timeout_why(plan.wait), events);
}

// Every name of the group, all or nothing: the members' leases in name order.
std::vector<Lease> acquire_multi(Client& client, const RunOptions& options, const RunPlan& plan,
                                 Wait wait, Events& events) {
  const std::string text = locks_text(options);
  MultiLock multi = [&] {
    std::vector<LockSpec> members;
    for (const std::string& name : options.names) {
      members.push_back(LockSpec{options.group, name, plan.mode});
    }
    try {
      return client.multi(std::move(members), plan.lock);
    } catch (const Error& e) {
      throw Failure::from("multi-lock " + text, e);
    }
  }();
  return acquire_leases_interruptibly(
      "acquire " + text,
      [&](std::stop_token stop) { return multi.acquire(wait, std::move(stop)).split(); },
      timeout_why(plan.wait), events);
}

}  // namespace

int run(const RunOptions& options) {
  const RunPlan plan = make_plan(options);
  const std::string lock_text = locks_text(options);

  // Before Client::open: the watchdog thread must inherit the blocked signal mask.
  Events events;

  Client client = [&] {
    try {
      return Client::open(plan.url, plan.client);
    } catch (const Error& e) {
      throw Failure::from("connect", e);
    }
  }();
  const Wait wait = plan.wait ? Wait::up_to(*plan.wait) : Wait::forever();
  std::vector<Lease> leases =
      options.permits > 0        ? acquire_permit(client, options, plan, wait, events)
      : options.names.size() > 1 ? acquire_multi(client, options, plan, wait, events)
                                 : acquire_lock(client, options, plan, wait, events);
  if (options.verbose) {
    const Fairness used = client.capabilities().resolve(plan.lock.fairness);
    const std::string held = options.permits > 0
                                 ? "1 of " + std::to_string(options.permits) + " permits"
                                 : std::string(to_string(plan.mode));
    for (const Lease& lease : leases) {
      print_diagnostic("granted " + printable(lease.group() + '/' + lease.name()) + " " + held +
                       ", token " + std::to_string(lease.token()) + ", fairness " +
                       std::string(to_string(used)) +
                       (plan.lock.fairness == Fairness::automatic ? " (automatic)" : "") +
                       ", ttl " + format_duration(plan.lock.ttl) + ", " + client.uri());
    }
  }
  const int status = run_supervised(options.command, leases, events, plan.lost);

  // The last acquired first, as a multi-lock releases.
  for (auto lease = leases.rbegin(); lease != leases.rend(); ++lease) {
    const std::string text = printable(lease->group() + '/' + lease->name());
    try {
      lease->release();
    } catch (const Error& e) {
      // CMD is done; its status is still the answer. The lease ends by itself within the
      // TTL once this process (and its watchdog) is gone.
      print_diagnostic("release " + text + ": " + e.what() +
                       "; the lock frees itself within --ttl");
    }
  }
  return status;
}

void add_run_command(Commands& commands) {
  auto options = std::make_shared<RunOptions>();
  CLI::App& app = commands.add("run", "Run a command while holding a lock",
                               [options] { return run(*options); });
  app.description(
      "Acquire a lock, run CMD while holding it, release it when CMD exits; exit with "
      "CMD's status");

  // Descriptions stay within one line of help; the footer explains the rest.
  app.add_option("--url", options->url, "Lock service URI (default: $WARDEN_URL); see below")
      ->type_name("URL");
  app.add_option("--group", options->group, "Lock group: 1..64 of [A-Za-z0-9._-]")
      ->type_name("G")
      ->required();
  app.add_option("--name", options->names,
                 "Lock name within the group: 1..512 bytes; repeat to hold several at once")
      ->type_name("N")
      ->expected(1)
      ->allow_extra_args(false)  // `--name N CMD...`: CMD is not a second name
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->required();
  app.add_flag("--shared", options->shared, "Take a shared (read) lock, not an exclusive one");
  app.add_option("--permits", options->permits,
                 "A semaphore of N permits: hold one, so at most N run at once (1..1000000)")
      ->type_name("N")
      ->check(CLI::Range(1, 1'000'000));
  app.add_option("--wait", options->wait,
                 "Give up after D without the lock (exit 75); 0 = try once [default: forever]")
      ->type_name("D");
  app.add_option("--ttl", options->ttl,
                 "Lease length: the lock frees itself D after renewals stop (10ms..168h)")
      ->type_name("D")
      ->capture_default_str();
  app.add_option("--lock-delay", options->lock_delay,
                 "Keep an expired (not released) lock from everyone for D (0..1h)")
      ->type_name("D")
      ->capture_default_str();
  app.add_option("--fairness", options->fairness,
                 "Waiters' order: automatic (FIFO where the engine has it), fifo, non-fair")
      ->type_name("F")
      ->capture_default_str();
  app.add_flag("--unfair", options->unfair,
               "Same as --fairness non-fair: take the lock whenever compatible with its holders");
  app.add_flag("-v,--verbose", options->verbose,
               "Say on stderr what was granted: mode, token, fairness used, TTL, URL");
  app.add_flag("--no-renew", options->no_renew,
               "Never renew: hold the lock for at most --ttl, then it is lost");
  app.add_option("--on-lost", options->on_lost,
                 "If the lease is lost: term, kill or ignore (see below); exit 70")
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

  app.footer(std::string(
                 "Durations (D): a number with a unit, ns us ms s m h, combinable: 500ms, "
                 "30s, 1m30s, 1.5h.\n"
                 "\n"
                 "URLs: mem:// (in-process: tests only), warden://HOST:PORT,\n"
                 "  redis://[USER:PASS@]HOST:PORT[/DB], redlock://H1:P1,H2:P2,...,\n"
                 "  redis+sentinel://[USER:PASS@]S1:P1,S2:P2,.../MASTER[/DB],\n"
                 "  redis+cluster://[USER:PASS@]H1:P1,H2:P2,...,\n"
                 "  etcd://H1:P1,H2:P2,..., zk://H1:P1,H2:P2,.../CHROOT,\n"
                 "  postgres://USER:PASS@HOST:PORT/DB\n"
                 "  mysql://USER:PASS@HOST:PORT/DB\n"
                 "\n"
                 "CMD runs with these environment variables:\n"
                 "  WARDEN_TOKEN      the grant's fencing token (decimal); pass it to what CMD\n"
                 "                    writes, so a late writer can be rejected\n"
                 "  WARDEN_SEQUENCER  the grant's sequencer, group/name:mode:token\n"
                 "With --name repeated, warden takes every named lock, all or nothing and in\n"
                 "name order (so two such runs never deadlock), and the variables hold each\n"
                 "lock's value in name order: tokens comma-separated, sequencers\n"
                 "space-separated.\n"
                 "\n"
                 "warden renews the lease while CMD runs (unless --no-renew). SIGINT, SIGTERM,\n"
                 "SIGHUP and SIGQUIT sent to warden are passed on to CMD (a terminal's ^C\n"
                 "reaches both directly); the lock is released once CMD has exited. A signal\n"
                 "that arrives while warden waits for the lock ends the wait (exit 128+N).\n"
                 "\n"
                 "If the lease is lost (renewals failed, or --ttl ran out with --no-renew),\n"
                 "another process may hold the lock while CMD still runs. --on-lost says what\n"
                 "happens to CMD then: term = SIGTERM, then SIGKILL after --kill-after;\n"
                 "kill = SIGKILL at once; ignore = a warning only. warden exits 70 in every case.\n"
                 "\n"
                 "Examples:\n"
                 "  warden run --url warden://127.0.0.1:7379 --group cron --name nightly -- "
                 "./report.sh\n"
                 "  WARDEN_URL=redis://127.0.0.1:6379 warden run --group db --name migrate "
                 "--wait 30s -- make migrate\n"
                 "  warden run --group accounts --name alice --name bob -- ./transfer.sh\n"
                 "\n") +
             std::string(kExitCodesHelp));
}

}  // namespace warden::cli

#include "cli/torture_command.h"

#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/duration.h"
#include "cli/exit_codes.h"
#include "cli/failure.h"
#include "torture/client_loop.h"
#include "torture/nemesis.h"
#include "torture/resource.h"
#include "torture/run.h"
#include "warden/error.h"

namespace warden::cli {
namespace {

struct TortureArgs {
  std::string url;
  int clients = 4;
  std::string duration = "10s";
  std::string ttl = "1s";
  std::string nemesis = "none";
  std::uint64_t seed = 1;
  std::string out = "torture-out";
  std::string epsilon = "1s";
  std::string label;
  std::vector<long> server_pids;
  std::vector<std::string> server_restart;
  std::string master_command;
  std::string isolate_command;
  std::string primitive = "lock";
  std::uint32_t permits = 2;
};

std::chrono::milliseconds millis(std::string_view option, const std::string& text) {
  try {
    return whole_milliseconds(parse_duration(text));
  } catch (const DurationError& e) {
    throw Failure(exit_code::kUsage, option, e.what());
  }
}

std::string self_path() {
  std::error_code error;
  const auto path = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) throw Failure(exit_code::kInternal, "torture", "cannot find the warden executable");
  return path.string();
}

int run(const TortureArgs& args) {
  torture::TortureOptions options;
  options.url = args.url;
  if (options.url.empty()) {
    if (const char* env = std::getenv("WARDEN_URL")) options.url = env;
  }
  if (options.url.empty())
    throw Failure(exit_code::kUsage, "--url", "not given, and WARDEN_URL is not set");
  options.clients = args.clients;
  options.duration = millis("--duration", args.duration);
  options.ttl = millis("--ttl", args.ttl);
  options.epsilon = millis("--epsilon", args.epsilon);
  const auto nemesis = torture::nemesis_from(args.nemesis);
  if (!nemesis) {
    std::string known;
    for (auto n : torture::all_nemeses())
      known += std::string(known.empty() ? "" : ", ") + torture::to_string(n);
    throw Failure(exit_code::kUsage, "--nemesis",
                  "unknown: '" + args.nemesis + "' (known: " + known + ")");
  }
  options.nemesis = *nemesis;
  options.seed = args.seed;
  options.out_dir = args.out;
  for (long pid : args.server_pids) options.server_pids.push_back(static_cast<pid_t>(pid));
  options.server_restart = args.server_restart;
  options.master_command = args.master_command;
  options.isolate_command = args.isolate_command;
  options.self = self_path();
  options.label = args.label;
  const auto primitive = torture::primitive_from(args.primitive);
  if (!primitive) {
    throw Failure(exit_code::kUsage, "--primitive",
                  "unknown: '" + args.primitive + "' (known: lock, semaphore, election)");
  }
  options.primitive = *primitive;
  options.permits = args.permits;
  try {
    return torture::run_torture(options);
  } catch (const Error& e) {
    throw Failure::from("torture", e);
  } catch (const std::runtime_error& e) {
    throw Failure(exit_code::kUsage, "torture", e.what());
  }
}

}  // namespace

void add_torture_command(Commands& commands) {
  auto a = std::make_shared<TortureArgs>();
  CLI::App& app = commands.add(
      "torture",
      "Run client processes against a lock service while injecting faults; judge what held",
      [a] { return run(*a); });
  app.add_option("--url", a->url, "Lock service URI (default: $WARDEN_URL)")->type_name("URL");
  app.add_option("--clients", a->clients, "Client processes")
      ->type_name("N")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--duration", a->duration, "How long the run lasts")
      ->type_name("D")
      ->capture_default_str();
  app.add_option("--ttl", a->ttl, "Lease length of every grant")
      ->type_name("D")
      ->capture_default_str();
  app.add_option("--nemesis", a->nemesis,
                 "none, pause-holder, kill-holder, kill-waiter, pause-server, kill-server, "
                 "restart-server, partition-client, failover, kill-leader, pause-leader, "
                 "restart-cell, partition-leader")
      ->type_name("NAME")
      ->capture_default_str();
  app.add_option("--seed", a->seed, "Seed of every random choice")
      ->type_name("X")
      ->capture_default_str();
  app.add_option("--out", a->out, "Directory for history.jsonl, summary.txt, timeline.svg")
      ->type_name("DIR")
      ->capture_default_str();
  app.add_option("--epsilon", a->epsilon,
                 "The engine's allowance beyond the TTL for handing an abandoned lock on")
      ->type_name("D")
      ->capture_default_str();
  app.add_option("--primitive", a->primitive,
                 "What the clients take: lock, semaphore (one of --permits), election")
      ->type_name("NAME")
      ->capture_default_str();
  app.add_option("--permits", a->permits, "A semaphore's permits (--primitive semaphore)")
      ->type_name("N")
      ->check(CLI::Range(1, 63))
      ->capture_default_str();
  app.add_option("--label", a->label, "The engine's name in row.md (default: the URL's scheme)")
      ->type_name("TEXT");
  app.add_option("--server-pid", a->server_pids, "A backend process (server faults); repeatable")
      ->type_name("PID")
      ->check(CLI::Range(1L, static_cast<long>(INT_MAX)));
  app.add_option("--server-restart", a->server_restart,
                 "Shell command that starts the matching --server-pid again and prints its PID")
      ->type_name("CMD");
  app.add_option("--isolate-command", a->isolate_command,
                 "Shell command run as `CMD cut PID` / `CMD heal PID` to cut a --server-pid off "
                 "from the other servers, not from the clients (partition-leader)")
      ->type_name("CMD");
  app.add_option("--master-command", a->master_command,
                 "Shell command that prints the PID of the --server-pid that is the master "
                 "or leader now (failover, kill-leader, pause-leader)")
      ->type_name("CMD");
  app.footer(
      "Durations (D): a number with a unit, ns us ms s m h: 500ms, 10s, 1m.\n"
      "\n"
      "Exit status:\n"
      "  0   the run ended and the checker's verdict is PASS\n"
      "  1   the run ended and the verdict is FAIL (summary.txt says which check)\n"
      "  64  usage error: bad option, duration, URL or nemesis, or a mode the engine\n"
      "      cannot offer\n"
      "  69  lock service unreachable or not answering\n"
      "  71  internal or operating-system error (a client or the resource could not\n"
      "      be started)\n"
      "  77  lock service refused our credentials\n");

  auto r = std::make_shared<torture::ResourceOptions>();
  CLI::App& resource =
      commands.add("torture-resource", "", [r] { return torture::run_resource(*r); });
  resource.group("");
  resource.add_option("--socket", r->socket_path)->required();
  resource.add_option("--history", r->history_path)->required();
  resource.add_flag("--unfenced{false}", r->fenced);

  auto c = std::make_shared<torture::ClientLoopOptions>();
  auto ttl = std::make_shared<std::string>("1s");
  auto primitive = std::make_shared<std::string>("lock");
  CLI::App& client = commands.add("torture-client", "", [c, ttl, primitive] {
    c->ttl = millis("--ttl", *ttl);
    const auto taken = torture::primitive_from(*primitive);
    if (!taken) throw Failure(exit_code::kUsage, "--primitive", "unknown: '" + *primitive + "'");
    c->primitive = *taken;
    return torture::run_client_loop(*c);
  });
  client.group("");
  client.add_option("--url", c->url)->required();
  client.add_option("--client", c->client)->required();
  client.add_option("--socket", c->socket_path)->required();
  client.add_option("--history", c->history_path)->required();
  client.add_option("--ttl", *ttl);
  client.add_option("--seed", c->seed);
  client.add_option("--primitive", *primitive);
  client.add_option("--permits", c->permits);
}

}  // namespace warden::cli

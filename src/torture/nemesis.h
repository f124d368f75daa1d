// torture/nemesis.h — the faults `warden torture` injects, one kind per run, each
// bounded in time and undone before the next.
//
//   none            no faults: the baseline
//   pause-holder    SIGSTOP the client holding the lock for 2·ttl + epsilon, then
//                   SIGCONT (Kleppmann's GC pause)
//   kill-holder     kill -9 the client holding the lock (a new client takes its place)
//   kill-waiter     kill -9 a client that does not hold it (likewise replaced)
//   pause-server    SIGSTOP one backend process for 2·ttl + epsilon, then SIGCONT
//   kill-server     kill -9 one backend process, wait ttl, start it again
//   restart-server  kill -9 one backend process and start it again at once
//   partition-client  cut the client holding the lock off the backend for 2·ttl +
//                   epsilon, then heal (each client reaches the backend through relays
//                   of its own, partition_proxy.h; the resource stays reachable)
//   failover        kill -9 the backend process that is the master now (a command
//                   names it), wait until another one is (the sentinels promoted a
//                   replica), then start the old one again (it comes back as a replica)
//   kill-leader     the same on a replicated server whose members elect a leader (a
//                   wardend cell): kill -9 the leader, wait for the next, restart it
//   pause-leader    SIGSTOP the leader (the command names it) for 2·ttl + epsilon,
//                   then SIGCONT: the others elect a new one meanwhile
//   restart-cell    kill -9 every backend process, then start each again
//   partition-leader  cut the leader (the command names it) off from the other members
//                   but not from the clients for 2·ttl + epsilon, then heal (an
//                   isolate command does both: the members run in network namespaces
//                   of the run's own)
//
// Server faults need the backend's PIDs and a command that starts each again (the
// matrix script starts the backends and passes both). Clock jumps of external servers
// are not injected: libfaketime hangs redis-server and Go's runtime ignores it, so a
// run says so rather than pretending.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace warden::torture {

enum class Nemesis {
  none,
  pause_holder,
  kill_holder,
  kill_waiter,
  pause_server,
  kill_server,
  restart_server,
  partition_client,
  failover,
  kill_leader,
  pause_leader,
  restart_cell,
  partition_leader,
};

const char* to_string(Nemesis nemesis);
std::optional<Nemesis> nemesis_from(const std::string& name);
std::vector<Nemesis> all_nemeses();

// Faults that hit the backend (and need its PIDs).
bool hits_server(Nemesis nemesis);
// Faults that need the command naming the master or leader now.
bool needs_master(Nemesis nemesis);

}  // namespace warden::torture

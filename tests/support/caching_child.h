// support/caching_child.h — a lock-caching client in a child process that then waits to
// be killed: a holder that dies with a lock cached, never giving it back.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>

namespace warden::testing {

// Forks a child that opens a Client on `uri` (caching, cache_idle an hour), takes (group,
// name) exclusively with `ttl` and drops it, so it stays cached, then waits. Returns the
// child's pid once the lock is cached, or -1 if it was not (that child is reaped). The
// caller ends it with kill_and_reap.
pid_t fork_caching_holder(const std::string& uri, const std::string& group, const std::string& name,
                          std::chrono::milliseconds ttl);

// SIGKILL, then waits for the child to be gone.
void kill_and_reap(pid_t child);

}  // namespace warden::testing

#include "support/caching_child.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/waiting.h"
#include "warden/client.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {

pid_t fork_caching_holder(const std::string& uri, const std::string& group, const std::string& name,
                          std::chrono::milliseconds ttl) {
  int ready[2];
  if (pipe(ready) != 0) return -1;
  const pid_t child = fork();
  if (child < 0) {
    close(ready[0]);
    close(ready[1]);
    return -1;
  }
  if (child == 0) {
    close(ready[0]);
    try {
      ClientOptions options = quick_options(std::chrono::milliseconds(2000));
      options.cache_idle = std::chrono::hours(1);
      Client client = Client::open(uri, options);
      LockOptions cached;
      cached.ttl = ttl;
      cached.cache = true;
      { Lease lease = client.lock(group, name, cached).acquire(Mode::exclusive, Wait::none()); }
      const char byte = 1;
      if (write(ready[1], &byte, 1) != 1) _exit(2);
      pause();
    } catch (...) {
    }
    _exit(1);
  }
  close(ready[1]);
  char byte = 0;
  const bool cached = read(ready[0], &byte, 1) == 1;
  close(ready[0]);
  if (cached) return child;
  waitpid(child, nullptr, 0);
  return -1;
}

void kill_and_reap(pid_t child) {
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

}  // namespace warden::testing

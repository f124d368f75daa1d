// engines/mysql/query_killer.h — ends a waiting statement from the side (KILL QUERY)
// without making the waiter wait for that.
//
// A cancelled wait must end within op_timeout even when the server is frozen, and a KILL
// sent to a frozen server waits as long as the server does (its connect, then its
// reply). So the waiter only asks; one thread of the engine sends the KILLs, on a
// session borrowed from the pool, in the order asked. A waiter whose KILL has no effect
// in time closes its own session, which ends its wait on the server as well.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <stop_token>
#include <thread>

#include "engines/mysql/pool.h"

namespace warden::engines::mysql {

class QueryKiller {
 public:
  explicit QueryKiller(Pool& pool);
  // Drops the KILLs not sent yet and waits for one under way (bounded by the pool's
  // connect and op timeouts).
  ~QueryKiller();
  QueryKiller(const QueryKiller&) = delete;
  QueryKiller& operator=(const QueryKiller&) = delete;

  // Asks for KILL QUERY `session`; returns at once. Thread-safe.
  void kill(std::uint64_t session);

 private:
  void run(const std::stop_token& stop);

  Pool& pool_;
  std::mutex mu_;
  std::condition_variable_any wake_;
  std::deque<std::uint64_t> sessions_;  // guarded by mu_
  std::jthread thread_;                 // last: starts after everything above exists
};

}  // namespace warden::engines::mysql

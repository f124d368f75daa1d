// engines/resp_client/pool.h — a bounded set of connections to one server, for
// requests that keep a connection busy for a long time (a parked ACQUIRE, a blocking
// pop): each concurrent caller takes a connection of its own and gives it back.
//
// A connection goes back to the idle list only if it is in step (not broken, nothing
// unread); it is handed out again only if it is still reusable() (the server has not
// closed it: looked at then, once per use, outside the pool's lock). Otherwise it is
// closed and its slot freed. Idle connections are reused most-recent first, so a burst leaves the
// rest idle rather than all lukewarm.
//
// Thread-safe. Handles must not outlive their Pool.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <vector>

#include "engines/resp_client/connection.h"
#include "engines/resp_client/connector.h"

namespace warden::engines::resp_client {

class Pool {
 public:
  // A connection taken from the pool; it goes back (or is closed) on destruction.
  class Handle {
   public:
    Handle(Handle&& other) noexcept;
    Handle& operator=(Handle&& other) noexcept;
    ~Handle();
    Connection& operator*() const { return *conn_; }
    Connection* operator->() const { return conn_.get(); }

   private:
    friend class Pool;
    Handle(Pool* pool, std::unique_ptr<Connection> conn);
    void give_back();
    Pool* pool_;
    std::unique_ptr<Connection> conn_;
  };

  // max_size: open connections at most (idle and in use); > 0.
  Pool(std::shared_ptr<Connector> connector, std::size_t max_size);
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // An idle connection, or a new one while fewer than max_size are open. When all are
  // in use, blocks until one is given back: returns nullopt if `until` passes or `stop`
  // is requested first. Throws what Connector::connect throws.
  std::optional<Handle> take(Clock::time_point until, std::stop_token stop);

  std::size_t max_size() const { return max_size_; }
  Connector& connector() const { return *connector_; }
  // Connections open now (idle, in use, or being opened).
  std::size_t open_count() const;
  std::size_t idle_count() const;

 private:
  void give_back(std::unique_ptr<Connection> conn);

  const std::shared_ptr<Connector> connector_;
  const std::size_t max_size_;

  mutable std::mutex mu_;
  std::condition_variable_any slot_freed_;
  std::vector<std::unique_ptr<Connection>> idle_;  // guarded by mu_; most recent last
  std::size_t open_ = 0;                           // guarded by mu_
};

}  // namespace warden::engines::resp_client

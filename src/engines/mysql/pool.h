// engines/mysql/pool.h — the sessions one mysql:// client has open.
//
// Each held lock keeps a session of its own (the session is the lease), each wait runs
// on one, and the short control statements (KILL QUERY, check, status, the registry)
// borrow one. At most `config.pool` are open at once; an idle one is reused while the
// server cannot yet have closed it for idleness. Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "engines/mysql/connection.h"
#include "engines/mysql/mysql_config.h"
#include "warden/error.h"

namespace warden::engines::mysql {

class Pool {
 public:
  explicit Pool(MysqlConfig config) : config_(std::move(config)) {}

  // An idle session, or a new one. `reused` says which. An idle session the server hung
  // up on meanwhile is closed, never handed out. Throws
  // Error(resource_exhausted) when `pool` sessions are open already, or like
  // Connection's constructor.
  std::unique_ptr<Connection> take(bool* reused = nullptr);
  // Keeps `connection` for reuse if it is usable; the server closes a session idle for
  // its wait_timeout, so it is reused only well within `idle_limit`.
  void give_back(std::unique_ptr<Connection> connection, std::chrono::seconds idle_limit);
  // Closes `connection` and frees its place.
  void discard(std::unique_ptr<Connection> connection);

  // For the asynchronous waits, which never block on a login: an idle session (as take()
  // hands out), or null; and a place for a new one, false when `pool` are open. A place
  // taken is freed by discard() of its session, or by unreserve() if none was made.
  std::unique_ptr<Connection> take_idle();
  bool reserve();
  void unreserve();

  // Runs `work` on a borrowed session and gives it back. An idle session that turns out
  // to be gone (the server restarted, or closed it) is replaced once by a new one; one
  // that got no answer in time is not (a frozen server answers a new one no sooner, and
  // the caller's op_timeout is spent).
  template <class F>
  auto with(F&& work, std::chrono::seconds idle_limit = std::chrono::seconds(3600)) {
    for (int attempt = 0;; ++attempt) {
      bool reused = false;
      auto connection = take(&reused);
      try {
        auto result = work(*connection);
        give_back(std::move(connection), idle_limit);
        return result;
      } catch (const Error& e) {
        const bool stale = reused && !connection->usable() && attempt == 0 &&
                           e.code() != Errc::deadline_exceeded;
        discard(std::move(connection));
        if (!stale) throw;
      } catch (...) {
        discard(std::move(connection));
        throw;
      }
    }
  }

  const MysqlConfig& config() const { return config_; }

 private:
  struct Idle {
    std::unique_ptr<Connection> connection;
    Clock::time_point usable_until;
  };
  const MysqlConfig config_;
  std::mutex mu_;
  std::vector<Idle> idle_;  // guarded by mu_; most recently returned last
  std::size_t open_ = 0;    // guarded by mu_: idle, borrowed and held
};

}  // namespace warden::engines::mysql

#include "engines/mysql/pool.h"

#include <algorithm>
#include <string>
#include <utility>

#include "warden/error.h"

namespace warden::engines::mysql {

std::unique_ptr<Connection> Pool::take(bool* reused) {
  if (auto idle = take_idle()) {
    if (reused) *reused = true;
    return idle;
  }
  if (!reserve()) {
    throw Error(Errc::resource_exhausted,
                "mysql: all " + std::to_string(config_.pool) +
                    " sessions of this client are in use (held locks and waits); raise "
                    "?pool=N");
  }
  if (reused) *reused = false;
  try {
    return std::make_unique<Connection>(config_);
  } catch (...) {
    unreserve();
    throw;
  }
}

std::unique_ptr<Connection> Pool::take_idle() {
  std::vector<std::unique_ptr<Connection>> expired;  // closed outside the lock
  std::lock_guard lock(mu_);
  const auto now = Clock::now();
  while (!idle_.empty()) {
    Idle idle = std::move(idle_.back());
    idle_.pop_back();
    if (idle.usable_until > now && !idle.connection->server_hung_up()) {
      open_ -= expired.size();
      return std::move(idle.connection);
    }
    expired.push_back(std::move(idle.connection));
  }
  open_ -= expired.size();
  return nullptr;
}

bool Pool::reserve() {
  std::lock_guard lock(mu_);
  if (open_ >= config_.pool) return false;
  ++open_;
  return true;
}

void Pool::unreserve() {
  std::lock_guard lock(mu_);
  --open_;
}

void Pool::give_back(std::unique_ptr<Connection> connection, std::chrono::seconds idle_limit) {
  if (!connection) return;
  if (!connection->usable()) return discard(std::move(connection));
  // A session keeps the idle limit of the last grant it held: the server's, if lower.
  if (connection->wait_timeout().count() > 0) {
    idle_limit = std::min(idle_limit, connection->wait_timeout());
  }
  std::lock_guard lock(mu_);
  // Half the server's idle limit: a session is never handed out just as the server
  // closes it.
  idle_.push_back(Idle{std::move(connection), Clock::now() + idle_limit / 2});
}

void Pool::discard(std::unique_ptr<Connection> connection) {
  if (!connection) return;
  connection->close();
  std::lock_guard lock(mu_);
  --open_;
}

}  // namespace warden::engines::mysql

#include "engines/resp_client/pool.h"

#include <utility>

namespace warden::engines::resp_client {

Pool::Handle::Handle(Pool* pool, std::unique_ptr<Connection> conn)
    : pool_(pool), conn_(std::move(conn)) {}

Pool::Handle::Handle(Handle&& other) noexcept : pool_(other.pool_), conn_(std::move(other.conn_)) {}

Pool::Handle& Pool::Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    give_back();
    pool_ = other.pool_;
    conn_ = std::move(other.conn_);
  }
  return *this;
}

Pool::Handle::~Handle() { give_back(); }

void Pool::Handle::give_back() {
  if (conn_) pool_->give_back(std::move(conn_));
}

Pool::Pool(std::shared_ptr<Connector> connector, std::size_t max_size)
    : connector_(std::move(connector)), max_size_(max_size) {}

std::optional<Pool::Handle> Pool::take(Clock::time_point until, std::stop_token stop) {
  std::unique_lock lock(mu_);
  while (true) {
    while (!idle_.empty()) {
      std::unique_ptr<Connection> conn = std::move(idle_.back());
      idle_.pop_back();
      // Looked at outside the lock (a system call: has the server closed it?).
      lock.unlock();
      if (conn->reusable()) return Handle(this, std::move(conn));
      conn.reset();  // closed, and its slot freed
      lock.lock();
      --open_;
    }
    if (open_ < max_size_) {
      ++open_;
      lock.unlock();
      try {
        return Handle(this, connector_->connect());
      } catch (...) {
        lock.lock();
        --open_;
        slot_freed_.notify_one();
        throw;
      }
    }
    const auto ready = [this] { return !idle_.empty() || open_ < max_size_; };
    if (until == Clock::time_point::max()) {
      if (!slot_freed_.wait(lock, stop, ready)) return std::nullopt;
    } else if (!slot_freed_.wait_until(lock, stop, until, ready)) {
      return std::nullopt;
    }
  }
}

void Pool::give_back(std::unique_ptr<Connection> conn) {
  // Without a system call: take() looks at the socket before it hands it out again.
  const bool keep = conn->in_step();
  {
    std::lock_guard guard(mu_);
    if (keep) {
      idle_.push_back(std::move(conn));
    } else {
      --open_;
    }
  }
  slot_freed_.notify_one();
  // A connection not kept is closed here, outside the lock.
}

std::size_t Pool::open_count() const {
  std::lock_guard guard(mu_);
  return open_;
}

std::size_t Pool::idle_count() const {
  std::lock_guard guard(mu_);
  return idle_.size();
}

}  // namespace warden::engines::resp_client

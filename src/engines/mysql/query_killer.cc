#include "engines/mysql/query_killer.h"

#include <string>

#include "warden/error.h"

namespace warden::engines::mysql {

QueryKiller::QueryKiller(Pool& pool)
    : pool_(pool), thread_([this](const std::stop_token& stop) { run(stop); }) {}

QueryKiller::~QueryKiller() {
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
}

void QueryKiller::kill(std::uint64_t session) {
  {
    std::lock_guard lock(mu_);
    sessions_.push_back(session);
  }
  wake_.notify_one();
}

void QueryKiller::run(const std::stop_token& stop) {
  while (true) {
    std::uint64_t session = 0;
    {
      std::unique_lock lock(mu_);
      if (!wake_.wait(lock, stop, [this] { return !sessions_.empty(); })) return;
      session = sessions_.front();
      sessions_.pop_front();
    }
    try {
      pool_.with([&](Connection& c) {
        c.query("KILL QUERY " + std::to_string(session), Clock::now() + pool_.config().op_timeout,
                "cancel a wait");
        return 0;
      });
    } catch (const Error&) {
      // Unknown thread (the wait ended), or no session to send it from: the waiter's
      // grace period then closes its session, which ends the wait as well.
    }
  }
}

}  // namespace warden::engines::mysql

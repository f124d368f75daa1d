#include "torture/client_loop.h"

#include <signal.h>

#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <stop_token>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

#include "torture/clock.h"
#include "torture/history.h"
#include "torture/resource_link.h"
#include "torture/stop_signal.h"
#include "warden/client.h"
#include "warden/election.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::torture {
namespace {

// The client's history file; written from the loop and from the watchdog's thread
// (lost signals).
class Recorder {
 public:
  Recorder(const std::string& path, int client) : out_(path), client_(client) {
    if (!out_) throw std::runtime_error("cannot write " + path);
  }
  void record(EventKind kind, std::uint64_t token = 0, std::string detail = {},
              Nanos time = now_ns()) {
    Event event;
    event.kind = kind;
    event.client = client_;
    event.time = time;
    event.token = token;
    event.detail = std::move(detail);
    std::lock_guard guard(mu_);
    write_event(out_, event);
    out_.flush();
  }

 private:
  std::mutex mu_;
  std::ofstream out_;
  const int client_;
};

// One grant of the primitive under test: a lock's or a permit's Lease, or a Leadership
// (whose term is its token). Empty when the wait ran out.
class Taken {
 public:
  Taken() = default;
  explicit Taken(Lease lease) : lease_(std::move(lease)) {}
  explicit Taken(Leadership leadership) : leadership_(std::move(leadership)) {}
  explicit operator bool() const { return lease_.valid() || leadership_.valid(); }
  std::uint64_t token() const { return lease_ ? lease_.token() : leadership_.term(); }
  std::stop_token lost_token() const {
    return lease_ ? lease_.lost_token() : leadership_.lost_token();
  }
  void release() {
    if (lease_) lease_.release();
    if (leadership_) leadership_.resign();
  }

 private:
  Lease lease_;
  Leadership leadership_;
};

// Takes the primitive once, waiting at most `wait`.
class Taker {
 public:
  Taker(Client& client, const ClientLoopOptions& options, const LockOptions& lock_options)
      : options_(options),
        lock_(client.lock("torture", options.lock_name, lock_options)),
        semaphore_(options.primitive == Primitive::semaphore
                       ? std::optional(client.semaphore("torture", options.lock_name,
                                                        options.permits, lock_options))
                       : std::nullopt),
        election_(options.primitive == Primitive::election
                      ? std::optional(client.election("torture", options.lock_name, lock_options))
                      : std::nullopt) {}

  Taken take() {
    const Wait wait = Wait::up_to(options_.wait);
    switch (options_.primitive) {
      case Primitive::semaphore:
        return Taken(semaphore_->acquire(1, wait));
      case Primitive::election:
        return Taken(election_->campaign("client " + std::to_string(options_.client), wait));
      case Primitive::lock:
        break;
    }
    return Taken(lock_.acquire(Mode::exclusive, wait));
  }

 private:
  const ClientLoopOptions& options_;
  Lock lock_;
  std::optional<Semaphore> semaphore_;
  std::optional<Election> election_;
};

}  // namespace

int run_client_loop(const ClientLoopOptions& options) {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGINT, &action, nullptr);

  try {
    Recorder recorder(options.history_path, options.client);
    ResourceLink resource(options.socket_path);
    ClientOptions client_options;
    client_options.lock_defaults.ttl = options.ttl;
    Client client = Client::open(options.url, client_options);
    LockOptions lock_options;
    lock_options.ttl = options.ttl;
    Taker taker(client, options, lock_options);
    std::mt19937_64 random(options.seed);
    std::uniform_int_distribution<std::int64_t> hold(options.hold_min.count(),
                                                     options.hold_max.count());
    const std::string me = std::to_string(options.client);

    while (!stop_signalled) {
      recorder.record(EventKind::request);
      Taken lease;
      try {
        lease = taker.take();
      } catch (const Error& e) {
        recorder.record(EventKind::error, 0, std::string("acquire: ") + e.what());
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      if (!lease) {
        recorder.record(EventKind::timeout);
        continue;
      }
      const std::uint64_t token = lease.token();
      recorder.record(EventKind::grant, token);
      std::stop_callback on_lost(lease.lost_token(), [&recorder, token] {
        recorder.record(EventKind::lost, token);
      });
      resource.ask("BEGIN " + me + " " + std::to_string(token));
      std::this_thread::sleep_for(std::chrono::milliseconds(hold(random)));
      resource.ask("END " + me + " " + std::to_string(token));
      // A release counts from when it was asked for: the backend may hand the lock on
      // before our confirmation arrives, and a release that failed (the backend was
      // down) still ends this client's use of the grant — the library keeps retrying it
      // in the background, or lets the lease lapse.
      const Nanos asked = now_ns();
      try {
        lease.release();
      } catch (const Error& e) {
        recorder.record(EventKind::error, token, std::string("release: ") + e.what());
      }
      recorder.record(EventKind::release, token, {}, asked);
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "warden torture client " << options.client << ": " << e.what() << "\n";
    return 1;
  }
}

}  // namespace warden::torture

// engines/resp_client/master_locator.h — where a Redis master behind Sentinel is now.
//
// The locator asks the sentinels (SENTINEL get-master-addr-by-name, each in turn until
// one answers) and keeps the answer until it is found wrong: a connection to it fails,
// the server says ROLE is not master, or a sentinel announces +switch-master. Every
// connection to the data nodes is opened through it (connect()), so pipelines and the
// subscriber follow the master wherever the sentinels move it.
//
// watch() starts a thread that stays subscribed to +switch-master on one sentinel (the
// next one when it fails) and, on a switch of this master — or on finding, after a
// reconnect, that the master moved while nobody listened — moves the cached address and
// calls the listener. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "engines/resp_client/connection.h"
#include "engines/resp_client/server_locator.h"
#include "warden/options.h"

namespace warden::engines::resp_client {

class TlsContext;

struct SentinelOptions {
  struct Address {
    std::string host;
    std::uint16_t port = 0;
  };
  std::vector<Address> sentinels;  // at least one
  std::string master_name;
  // AUTH for the sentinels (their own requirepass or ACL user), when set.
  std::optional<std::string> user;
  std::optional<std::string> password;
  // Bound for each exchange with a sentinel. Must be positive.
  std::chrono::milliseconds timeout{5'000};
  core::TlsOptions tls;  // the sentinels' TLS, as the data nodes'
};

class MasterLocator final : public ServerLocator {
 public:
  MasterLocator(SentinelOptions options, const RetryPolicy& retry,
                std::shared_ptr<const TlsContext> tls = nullptr);
  ~MasterLocator() override;  // stops the watch thread
  MasterLocator(const MasterLocator&) = delete;
  MasterLocator& operator=(const MasterLocator&) = delete;

  // The master's address: the cached one, else asked from the sentinels now. Throws
  // Error(unavailable) naming every sentinel and why it gave no address (down, refused
  // our password, does not know the master name).
  SentinelOptions::Address master();
  // The cached address was wrong: the next master() asks the sentinels again.
  void forget(const std::string& endpoint) override;
  // true if `endpoint` ("host:port") is the master as last known (or nothing is known).
  bool is_current(const std::string& endpoint) override;

  // Opens a connection to the master with `data` (its credentials, db, TLS, timeout;
  // host and port are the master's) and confirms with ROLE that the server is the
  // master. A connection that fails, or a server that is not (yet) the master, makes the
  // locator forget the address and ask the sentinels once more before giving up: throws
  // what Connection::open throws, or Error(unavailable) for a server that is not master.
  std::unique_ptr<Connection> connect(const ConnectOptions& data,
                                      const std::shared_ptr<const TlsContext>& tls) override;

  // Starts following +switch-master; `on_switch` runs on a thread of the locator's after
  // the master moved (announced by a sentinel, or found by a connection). Call at most
  // once. stop_watching() ends both threads (the destructor does too): an owner whose
  // listener uses its own members calls it before they go.
  void watch(std::function<void()> on_switch);
  void stop_watching();

  // "master NAME via sentinels h1:p1,h2:p2", for messages.
  const std::string& description() const override { return description_; }

 private:
  // Asks one sentinel; nullopt if it does not know the master. Throws Error if it
  // cannot be asked.
  std::optional<SentinelOptions::Address> ask(const SentinelOptions::Address& sentinel);
  std::unique_ptr<Connection> open_sentinel(const SentinelOptions::Address& sentinel);
  // Sets the cached address; true if it changed from a known other one.
  bool move_to(const SentinelOptions::Address& address);
  void announce();
  void watch_loop(const std::stop_token& stop);
  void announce_loop(const std::stop_token& stop);

  struct Notifier;

  const SentinelOptions options_;
  const RetryPolicy retry_;
  const std::shared_ptr<const TlsContext> tls_;
  const std::string description_;

  std::mutex mu_;
  std::optional<SentinelOptions::Address> master_;  // guarded by mu_; empty once forgotten
  std::string last_known_;                          // guarded by mu_; "host:port"
  const std::unique_ptr<Notifier> notifier_;
  std::function<void()> on_switch_;  // set once, before the threads
  std::jthread announcer_;
  std::jthread watcher_;
};

}  // namespace warden::engines::resp_client

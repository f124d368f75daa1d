#include "engines/resp_client/master_locator.h"

#include <charconv>
#include <condition_variable>
#include <string_view>
#include <utility>

#include "core/stoppable_sleep.h"
#include "engines/resp_client/backoff.h"
#include "engines/resp_client/errors.h"
#include "engines/resp_client/stop_waker.h"
#include "warden/error.h"

namespace warden::engines::resp_client {
namespace {

// How long the watch thread waits on a quiet sentinel connection before looking at its
// stop token again (the stop waker ends the wait at once; this is a backstop).
constexpr auto kWatchSlice = std::chrono::seconds(1);

std::string describe(const SentinelOptions& options) {
  std::string out = "master '" + options.master_name + "' via sentinels ";
  for (std::size_t i = 0; i < options.sentinels.size(); ++i) {
    if (i > 0) out += ',';
    out += endpoint_name(options.sentinels[i].host, options.sentinels[i].port);
  }
  return out;
}

std::optional<std::uint16_t> port_of(std::string_view text) {
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value == 0 || value > 65535) {
    return std::nullopt;
  }
  return static_cast<std::uint16_t>(value);
}

}  // namespace

// Announces switches to the listener from a thread of its own, so that whoever finds the
// master moved (a data connection, inside a pipeline round) never runs the listener —
// which talks to the new master through those same pipelines — itself.
struct MasterLocator::Notifier {
  std::mutex mu;
  std::condition_variable_any cv;
  std::uint64_t announced = 0;  // guarded by mu
  std::uint64_t handled = 0;    // guarded by mu
};

MasterLocator::MasterLocator(SentinelOptions options, const RetryPolicy& retry,
                             std::shared_ptr<const TlsContext> tls)
    : options_(std::move(options)),
      retry_(retry),
      tls_(std::move(tls)),
      description_(describe(options_)),
      notifier_(std::make_unique<Notifier>()) {}

MasterLocator::~MasterLocator() { stop_watching(); }

void MasterLocator::stop_watching() {
  watcher_.request_stop();
  announcer_.request_stop();
  if (watcher_.joinable()) watcher_.join();
  if (announcer_.joinable()) announcer_.join();
}

std::unique_ptr<Connection> MasterLocator::open_sentinel(const SentinelOptions::Address& sentinel) {
  ConnectOptions connect;
  connect.host = sentinel.host;
  connect.port = sentinel.port;
  connect.user = options_.user;
  connect.password = options_.password;
  connect.timeout = options_.timeout;
  connect.tls = options_.tls;
  return Connection::open(connect, tls_);
}

std::optional<SentinelOptions::Address> MasterLocator::ask(
    const SentinelOptions::Address& sentinel) {
  auto conn = open_sentinel(sentinel);
  const std::string_view args[] = {"SENTINEL", "get-master-addr-by-name", options_.master_name};
  const Reply reply =
      conn->command(std::span<const std::string_view>(args), Clock::now() + options_.timeout);
  if (reply.is_error()) throw reply_error(reply, "SENTINEL get-master-addr-by-name");
  if (reply.is_nil()) return std::nullopt;
  if (!reply.is_array() || reply.elements.size() != 2) {
    throw unexpected_reply(reply, "SENTINEL get-master-addr-by-name");
  }
  const auto port = port_of(reply.elements[1].text);
  if (!port || reply.elements[0].text.empty()) {
    throw unexpected_reply(reply, "SENTINEL get-master-addr-by-name");
  }
  return SentinelOptions::Address{reply.elements[0].text, *port};
}

bool MasterLocator::move_to(const SentinelOptions::Address& address) {
  std::lock_guard lock(mu_);
  master_ = address;
  const std::string endpoint = endpoint_name(address.host, address.port);
  const bool moved = !last_known_.empty() && last_known_ != endpoint;
  last_known_ = endpoint;
  return moved;
}

void MasterLocator::announce() {
  {
    std::lock_guard lock(notifier_->mu);
    ++notifier_->announced;
  }
  notifier_->cv.notify_all();
}

SentinelOptions::Address MasterLocator::master() {
  {
    std::lock_guard lock(mu_);
    if (master_) return *master_;
  }
  std::string why;
  for (const auto& sentinel : options_.sentinels) {
    const std::string where = endpoint_name(sentinel.host, sentinel.port);
    try {
      if (const auto address = ask(sentinel)) {
        if (move_to(*address)) announce();
        return *address;
      }
      why += "; " + where + " does not know the master name";
    } catch (const Error& e) {
      why += "; " + where + ": " + e.what();
    }
  }
  throw Error(Errc::unavailable, "no sentinel named the " + description_ + why);
}

void MasterLocator::forget(const std::string& endpoint) {
  std::lock_guard lock(mu_);
  if (master_ && endpoint_name(master_->host, master_->port) == endpoint) master_.reset();
}

bool MasterLocator::is_current(const std::string& endpoint) {
  std::lock_guard lock(mu_);
  return master_ && endpoint_name(master_->host, master_->port) == endpoint;
}

std::unique_ptr<Connection> MasterLocator::connect(const ConnectOptions& data,
                                                   const std::shared_ptr<const TlsContext>& tls) {
  // A second try after forgetting: the first may have met a master the sentinels have
  // replaced already.
  for (int attempt = 0;; ++attempt) {
    const SentinelOptions::Address address = master();
    ConnectOptions options = data;
    options.locator = nullptr;
    options.host = address.host;
    options.port = address.port;
    const std::string endpoint = endpoint_name(address.host, address.port);
    std::unique_ptr<Connection> conn;
    try {
      conn = Connection::open(options, tls);
    } catch (const Error& e) {
      if (e.code() == Errc::permission_denied || e.code() == Errc::invalid_argument) throw;
      forget(endpoint);
      if (attempt > 0) throw;
      continue;
    }
    const std::string_view role_args[] = {"ROLE"};
    const Reply role =
        conn->command(std::span<const std::string_view>(role_args), Clock::now() + data.timeout);
    if (role.is_array() && !role.elements.empty() && role.elements[0].text == "master") {
      return conn;
    }
    forget(endpoint);
    if (attempt > 0) {
      throw Error(Errc::unavailable, endpoint + " is not the " + description_ +
                                         " (ROLE: " + role.describe() +
                                         "); the sentinels have not moved it yet");
    }
  }
}

void MasterLocator::watch(std::function<void()> on_switch) {
  on_switch_ = std::move(on_switch);
  announcer_ = std::jthread([this](const std::stop_token& stop) { announce_loop(stop); });
  watcher_ = std::jthread([this](const std::stop_token& stop) { watch_loop(stop); });
}

void MasterLocator::announce_loop(const std::stop_token& stop) {
  while (true) {
    {
      std::unique_lock lock(notifier_->mu);
      if (!notifier_->cv.wait(lock, stop,
                              [&] { return notifier_->announced != notifier_->handled; })) {
        return;  // stopped
      }
      notifier_->handled = notifier_->announced;
    }
    on_switch_();
  }
}

void MasterLocator::watch_loop(const std::stop_token& stop) {
  const StopWaker waker(stop);
  Backoff backoff(retry_);
  std::size_t next = 0;
  while (!stop.stop_requested()) {
    const auto& sentinel = options_.sentinels[next++ % options_.sentinels.size()];
    try {
      auto conn = open_sentinel(sentinel);
      // Subscribed first, then asked: a switch between the two is seen either way.
      const std::string_view args[] = {"SUBSCRIBE", "+switch-master"};
      const Reply confirm =
          conn->command(std::span<const std::string_view>(args), Clock::now() + options_.timeout);
      if (confirm.is_error()) throw reply_error(confirm, "SUBSCRIBE +switch-master");
      if (const auto address = ask(sentinel)) {
        if (move_to(*address)) announce();
      }
      backoff.reset();
      while (!stop.stop_requested()) {
        const auto message = conn->poll_reply(Clock::now() + kWatchSlice, waker.fd());
        if (!message) continue;
        // ["message", "+switch-master", "NAME OLD-IP OLD-PORT NEW-IP NEW-PORT"]
        if (!message->is_array() || message->elements.size() != 3 ||
            message->elements[0].text != "message") {
          continue;
        }
        const std::string& text = message->elements[2].text;
        std::vector<std::string_view> words;
        for (std::size_t at = 0; at <= text.size();) {
          const auto space = std::min(text.find(' ', at), text.size());
          words.emplace_back(text.data() + at, space - at);
          at = space + 1;
        }
        if (words.size() != 5 || words[0] != options_.master_name) continue;
        const auto port = port_of(words[4]);
        if (!port) continue;
        if (move_to(SentinelOptions::Address{std::string(words[3]), *port})) announce();
      }
    } catch (const Error&) {
      // This sentinel is down or refused us: the next one, after a pause. Meanwhile the
      // data connections still find a moved master by their own failures.
      core::sleep_for(backoff.next_delay(), stop);
    }
  }
}

}  // namespace warden::engines::resp_client

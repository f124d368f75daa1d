// The fixture and helpers of the conformance suite (see conformance_suite.h).
#include "conformance/conformance_suite.h"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <map>
#include <random>
#include <utility>

namespace warden::conformance {

std::string name_printer(const ::testing::TestParamInfo<EngineCase>& info) {
  return info.param.name;
}

void PrintTo(const EngineCase& engine, std::ostream* os) { *os << engine.name; }

// --- Flag -------------------------------------------------------------------------

void Flag::set() {
  {
    std::lock_guard lock(mu_);
    if (set_) return;
    set_ = true;
    set_at_ = Clock::now();
  }
  cv_.notify_all();
}

bool Flag::is_set() const {
  std::lock_guard lock(mu_);
  return set_;
}

bool Flag::wait_for(Clock::duration timeout) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return set_; });
}

Clock::time_point Flag::set_at() const {
  std::lock_guard lock(mu_);
  return set_at_;
}

bool eventually(const std::function<bool()>& pred, Clock::duration timeout, Clock::duration step) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    if (pred()) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(step);
  }
}

// --- Holder -----------------------------------------------------------------------

Holder::Holder(Lock lock, Mode mode, Wait wait)
    : thread_([this, lock = std::move(lock), mode, wait](std::stop_token stop) mutable {
        run(std::move(stop), std::move(lock), mode, wait);
      }) {}

Holder::~Holder() {
  // Cancels a wait still under way, then joins; a held lease is released by run().
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
}

void Holder::run(std::stop_token stop, Lock lock, Mode mode, Wait wait) {
  Lease lease;
  try {
    lease = lock.acquire(mode, wait, stop);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "Holder: acquire threw: " << e.what();
  }
  if (lease) {
    {
      std::lock_guard guard(mu_);
      token_ = lease.token();
    }
    granted_.set();
  }
  finished_.set();
  if (!lease) return;

  {
    std::unique_lock guard(mu_);
    cv_.wait(guard, stop, [this] { return release_requested_; });
  }
  bool ok = true;
  try {
    lease.release();
  } catch (const std::exception& e) {
    ok = false;
    ADD_FAILURE() << "Holder: release threw: " << e.what();
  }
  {
    std::lock_guard guard(mu_);
    release_ok_ = ok;
  }
  released_.set();
}

bool Holder::wait_granted(Clock::duration timeout) const { return granted_.wait_for(timeout); }

bool Holder::wait_finished(Clock::duration timeout) const { return finished_.wait_for(timeout); }

std::uint64_t Holder::token() const {
  std::lock_guard guard(mu_);
  return token_;
}

bool Holder::release() {
  if (!granted()) return false;
  {
    std::lock_guard guard(mu_);
    release_requested_ = true;
  }
  cv_.notify_all();
  if (!released_.wait_for(kPatience)) return false;
  std::lock_guard guard(mu_);
  return release_ok_;
}

// --- Conformance ------------------------------------------------------------------

namespace {

// "r<random>-<pid>-<n>-<test name>", cut to the 64 bytes a group may have. The unique
// part comes first so that cutting keeps it.
std::string unique_group() {
  static std::atomic<unsigned> counter{0};
  static const unsigned salt = std::random_device{}();
  char prefix[48];
  std::snprintf(prefix, sizeof prefix, "r%08x-%d-%u-", salt, static_cast<int>(::getpid()),
                counter.fetch_add(1));
  std::string group = prefix;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  for (char c : std::string(info != nullptr ? info->name() : "test")) {
    const bool ok =
        std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '-';
    group.push_back(ok ? c : '.');
  }
  if (group.size() > 64) group.resize(64);
  return group;
}

// The backends this process's cases share: one per EngineCase, started by the first
// case that runs on it. A case that fails stops its backend (the next case on that
// engine starts a new one), so a failure cannot spill into later cases; the rest are
// stopped when every case has run, before the process's static objects go away.
class SharedBackends final : public ::testing::Environment {
 public:
  static SharedBackends& instance() {
    // GoogleTest owns (and deletes) the environments it is given.
    static SharedBackends* const shared = [] {
      auto* created = new SharedBackends;
      ::testing::AddGlobalTestEnvironment(created);
      return created;
    }();
    return *shared;
  }

  std::shared_ptr<Backend> of(const EngineCase& engine) {
    std::shared_ptr<Backend>& backend = backends_[engine.name];
    if (!backend) backend = engine.start();
    return backend;
  }
  void forget(const EngineCase& engine) { backends_.erase(engine.name); }
  void TearDown() override { backends_.clear(); }

 private:
  std::map<std::string, std::shared_ptr<Backend>> backends_;
};

// Registered before main() runs the cases, so the environment's TearDown is called.
[[maybe_unused]] const SharedBackends& kRegistered = SharedBackends::instance();

}  // namespace

void Conformance::SetUp() {
  backend_ = SharedBackends::instance().of(GetParam());
  ASSERT_NE(backend_, nullptr) << "EngineCase " << GetParam().name << " started no backend";
  group_ = unique_group();
  probe_.emplace(Client::open(backend_->uri(), client_options()));
  caps_ = GetParam().capabilities;
  reported_ = probe_->capabilities();
}

void Conformance::TearDown() {
  probe_.reset();
  backend_.reset();
  if (HasFailure()) SharedBackends::instance().forget(GetParam());
}

LockOptions Conformance::lock_options() const {
  LockOptions options;  // fairness automatic: what the engine has
  options.cache = GetParam().cache;
  return options;
}

Client Conformance::open_client(ClientOptions options) { return open_client_on(*backend_, options); }

Client Conformance::open_client_on(const Backend& backend, ClientOptions options) const {
  if (GetParam().cache) options.lock_defaults.cache = true;
  return Client::open(backend.uri(), options);
}

Client Conformance::open_client_without_renewals() {
  ClientOptions options = client_options();
  options.watchdog = false;
  return open_client(options);
}

LockOptions Conformance::lock_options_with_ttl(std::chrono::milliseconds ttl) const {
  LockOptions options = lock_options();
  options.ttl = ttl;
  return options;
}

bool Conformance::skip_unless(bool Capabilities::*cap, std::string_view what) {
  if (reported_.*cap != caps_.*cap) {
    ADD_FAILURE() << GetParam().name << " reports capability '" << what << "' as "
                  << (reported_.*cap ? "true" : "false") << ", its EngineCase pins "
                  << (caps_.*cap ? "true" : "false");
    return true;
  }
  if (caps_.*cap) return false;
  [&] { GTEST_SKIP() << GetParam().name << " does not offer capability '" << what << "'"; }();
  return true;
}

std::optional<std::size_t> Conformance::queued(std::string_view name) {
  return backend_->queued(group_, name);
}

bool Conformance::skip_unless_queue() {
  std::optional<std::size_t> probe;
  try {
    probe = queued("queue-probe");
  } catch (const std::exception& e) {
    ADD_FAILURE() << GetParam().name << ": the queue probe failed: " << e.what();
    return true;
  }
  if (probe) return false;
  [&] { GTEST_SKIP() << GetParam().name << " keeps no queue the suite can read"; }();
  return true;
}

::testing::AssertionResult Conformance::queue_reaches(std::string_view name, std::size_t n) {
  std::optional<std::size_t> last;
  try {
    const auto deadline = Clock::now() + kPatience;
    while (true) {
      last = queued(name);
      if (!last || *last == n) return ::testing::AssertionSuccess();
      if (Clock::now() >= deadline) break;
      std::this_thread::sleep_for(5ms);
    }
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure()
           << "the queue probe of '" << name << "' failed: " << e.what();
  }
  return ::testing::AssertionFailure() << "the queue of '" << name << "' holds " << *last
                                       << " requests after " << kPatience / 1s << " s, not " << n;
}

bool Conformance::grantable(std::string_view name, Mode mode) {
  return grantable(name, mode, lock_options());
}

bool Conformance::grantable(std::string_view name, Mode mode, const LockOptions& options) {
  // The probe never caches: what it takes, it gives back at once.
  LockOptions probe_options = options;
  probe_options.cache = false;
  Lease lease = probe_->lock(group_, name, probe_options).acquire(mode, Wait::none());
  if (!lease && GetParam().cache) {
    // A lock another client caches unused is given back when someone asks for it, one
    // revoke round trip later (docs/contract.md, Lock caching): a short wait finds it
    // free. A held one stays held. (A waiter is asking on every engine; a try only where
    // the backend itself sees tries, like wardend.)
    lease = probe_->lock(group_, name, probe_options).acquire(mode, Wait::up_to(300ms));
  }
  if (!lease) return false;
  lease.release();
  return true;
}

bool Conformance::freed(std::string_view name, Mode mode) {
  return freed(name, mode, lock_options());
}

bool Conformance::freed(std::string_view name, Mode mode, const LockOptions& options) {
  return eventually([&] { return grantable(name, mode, options); });
}

}  // namespace warden::conformance

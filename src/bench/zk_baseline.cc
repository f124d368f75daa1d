#include "bench/zk_baseline.h"

#include <zookeeper/zookeeper.h>

#include <condition_variable>
#include <mutex>

#include "core/uri.h"
#include "warden/error.h"

namespace warden::bench {
namespace {

using Clock = std::chrono::steady_clock;

const std::string kRoot = "/warden-bench";

struct Connected {
  std::mutex mu;
  std::condition_variable cv;
  bool connected = false;
};

void on_session(zhandle_t*, int type, int state, const char*, void* context) {
  if (type != ZOO_SESSION_EVENT || state != ZOO_CONNECTED_STATE) return;
  auto* connected = static_cast<Connected*>(context);
  {
    std::lock_guard lock(connected->mu);
    connected->connected = true;
  }
  connected->cv.notify_all();
}

void check(int rc, const std::string& what) {
  if (rc == ZOK || rc == ZNODEEXISTS) return;
  const Errc code =
      rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT ? Errc::unavailable : Errc::internal;
  throw Error(code, what + ": ZooKeeper: " + zerror(rc));
}

class ZooKeeperCycleClient final : public CycleClient {
 public:
  ZooKeeperCycleClient(const std::string& hosts, std::vector<std::string> parents,
                       std::chrono::milliseconds timeout)
      : connected_(std::make_unique<Connected>()), parents_(std::move(parents)) {
    handle_ = zookeeper_init2(hosts.c_str(), &on_session, 30'000, nullptr, connected_.get(), 0,
                              [](const char*) {});
    if (handle_ == nullptr) throw Error(Errc::invalid_argument, "zookeeper_init(" + hosts + ")");
    std::unique_lock lock(connected_->mu);
    if (!connected_->cv.wait_for(lock, timeout, [&] { return connected_->connected; })) {
      throw Error(Errc::unavailable, "no ZooKeeper server of " + hosts + " answered");
    }
    lock.unlock();
    check(zoo_create(handle_, kRoot.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0),
          "create " + kRoot);
    for (const std::string& parent : parents_) {
      // Persistent, not a container: the server deletes an emptied container, and the
      // next create would then fail.
      check(zoo_create(handle_, parent.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0),
            "create " + parent);
    }
  }

  ~ZooKeeperCycleClient() override {
    for (const std::string& parent : parents_) zoo_delete(handle_, parent.c_str(), -1);
    zookeeper_close(handle_);
  }

  std::optional<std::chrono::nanoseconds> cycle(const std::stop_token&) override {
    const std::string& parent = parents_[next_];
    if (++next_ == parents_.size()) next_ = 0;
    char created[512];
    const std::string path = parent + "/x-";
    const auto t0 = Clock::now();
    check(zoo_create(handle_, path.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL,
                     created, sizeof created),
          "create " + path);
    const auto t1 = Clock::now();
    check(zoo_delete(handle_, created, -1), std::string("delete ") + created);
    return t1 - t0;
  }

 private:
  std::unique_ptr<Connected> connected_;
  zhandle_t* handle_ = nullptr;
  std::vector<std::string> parents_;
  std::size_t next_ = 0;
};

}  // namespace

std::vector<std::unique_ptr<CycleClient>> open_zookeeper_clients(
    const std::string& url, const Workload& workload, std::chrono::milliseconds timeout) {
  const core::Uri uri = core::Uri::parse(url);
  if (uri.scheme != "zk" || uri.hosts.empty()) {
    throw Error(Errc::invalid_argument, "--baseline needs a zk://HOST:PORT URL");
  }
  if (uri.user || uri.password) {
    throw Error(Errc::invalid_argument, "the ZooKeeper baseline does not support auth");
  }
  std::string hosts;
  for (const core::HostPort& host : uri.hosts) {
    if (!hosts.empty()) hosts += ',';
    hosts += host.host + ':' + std::to_string(host.port.value_or(2181));
  }
  std::vector<std::unique_ptr<CycleClient>> clients;
  for (int i = 0; i < workload.clients; ++i) {
    std::vector<std::string> parents;
    for (int k = 0; k < workload.keys; ++k)
      parents.push_back(kRoot + '/' + lock_name(workload, i, k));
    clients.push_back(std::make_unique<ZooKeeperCycleClient>(hosts, std::move(parents), timeout));
  }
  return clients;
}

}  // namespace warden::bench

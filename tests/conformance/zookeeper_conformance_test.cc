// The conformance suite against zk://, on a real ZooKeeper (one per case kind and test process) on
// free loopback ports with temp data dirs: a standalone server, and a 3-server ensemble
// (tests/support/zookeeper_server.h).
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "conformance/backend.h"
#include "conformance/conformance_suite.h"
#include "conformance/election_suite.h"
#include "conformance/multi_lock_suite.h"
#include "conformance/semaphore_suite.h"
#include "support/request_queue.h"
#include "support/zookeeper_server.h"

namespace warden::conformance {
namespace {

// zk:// queues fairly (the sequence order is the queue) and has shared mode, but no
// barging and no lock-delay (docs/engines/zookeeper.md); zxids survive restarts.
constexpr Capabilities kZooKeeper{.shared = true,
                                  .fair = true,
                                  .non_fair = false,
                                  .lock_delay = false,
                                  .fencing = true,
                                  .durable_tokens = true,
                                  .check = true,
                                  .semaphore = true,
                                  .election = true,
                                  .watch = true,
                                  .cache = true};

class ZooKeeperBackend final : public Backend {
 public:
  explicit ZooKeeperBackend(int servers) : ensemble_(testing::ZooKeeperOptions{servers}) {}

  std::string uri() const override { return ensemble_.uri(); }
  bool reached_only_at_its_uri() const override { return true; }

  // Behind the clients' back, as an operator could: delete every request node of the
  // lock. The holders' sessions live on; only their nodes are gone.
  bool drop_grants(std::string_view group, std::string_view name) override {
    const std::string lock = testing::zk_lock_path(group, name);
    for (const std::string& child : ensemble_.children(lock)) {
      const int rc = ensemble_.delete_node(lock + '/' + child);
      if (rc != 0 /* ZOK */ && rc != -101 /* ZNONODE: gone meanwhile */) {
        throw std::runtime_error("deleting " + lock + '/' + child +
                                 " failed: " + std::to_string(rc));
      }
    }
    return true;
  }

  // The lock node's children "x-GUID-SEQUENCE" (exclusive) and "s-GUID-SEQUENCE"
  // (shared) in sequence order, less the ones that hold it.
  // A semaphore's nodes ("p-K.N-GUID-SEQ") hold while the permits from the first one on
  // fit in N.
  std::optional<std::size_t> queued(std::string_view group, std::string_view name) override {
    std::vector<std::pair<std::string, std::string>> requests;  // (sequence, name)
    for (const std::string& child : ensemble_.children(testing::zk_lock_path(group, name))) {
      const auto dash = child.rfind('-');
      if (child.size() < 2 || child[1] != '-' ||
          (child[0] != 'x' && child[0] != 's' && child[0] != 'p') || dash == std::string::npos) {
        throw std::runtime_error("unexpected node under the lock: " + child);
      }
      // The server's sequence suffix has a fixed width: comparing text orders it.
      requests.emplace_back(child.substr(dash + 1), child);
    }
    std::sort(requests.begin(), requests.end());
    if (!requests.empty() && requests.front().second[0] == 'p') {
      std::size_t holding = 0;
      unsigned held = 0;
      for (const auto& request : requests) {
        unsigned k = 0;
        unsigned n = 0;
        if (std::sscanf(request.second.c_str(), "p-%u.%u-", &k, &n) != 2) {
          throw std::runtime_error("unexpected node under the semaphore: " + request.second);
        }
        if (held + k > n) break;
        held += k;
        ++holding;
      }
      return requests.size() - holding;
    }
    std::vector<Mode> modes;
    for (const auto& request : requests) {
      modes.push_back(request.second[0] == 'x' ? Mode::exclusive : Mode::shared);
    }
    return testing::waiting_requests(modes);
  }

  bool freeze() override {
    for (int i = 0; i < ensemble_.size(); ++i) ensemble_.pause(i);
    return true;
  }
  void thaw() override {
    for (int i = 0; i < ensemble_.size(); ++i) ensemble_.resume(i);
  }

 private:
  mutable testing::ZooKeeperEnsemble ensemble_;
};

INSTANTIATE_TEST_SUITE_P(
    ZooKeeper, Conformance,
    ::testing::Values(EngineCase{"ZooKeeperStandalone", kZooKeeper,
                                 [] { return std::make_unique<ZooKeeperBackend>(1); }},
                      EngineCase{"ZooKeeperEnsemble3", kZooKeeper,
                                 [] { return std::make_unique<ZooKeeperBackend>(3); }},
                      // Every lock cached: revokes come from watching the lock's nodes.
                      EngineCase{"ZooKeeperCached", kZooKeeper,
                                 [] { return std::make_unique<ZooKeeperBackend>(1); },
                                 /*cache=*/true}),
    name_printer);
INSTANTIATE_TEST_SUITE_P(ZooKeeper, SemaphoreConformance,
                         ::testing::Values(EngineCase{
                             "ZooKeeperStandalone", kZooKeeper,
                             [] { return std::make_unique<ZooKeeperBackend>(1); }}),
                         name_printer);

INSTANTIATE_TEST_SUITE_P(ZooKeeper, ElectionConformance,
                         ::testing::Values(EngineCase{
                             "ZooKeeperStandalone", kZooKeeper,
                             [] { return std::make_unique<ZooKeeperBackend>(1); }}),
                         name_printer);

INSTANTIATE_TEST_SUITE_P(ZooKeeper, MultiLockConformance,
                         ::testing::Values(EngineCase{
                             "ZooKeeperStandalone", kZooKeeper,
                             [] { return std::make_unique<ZooKeeperBackend>(1); }}),
                         name_printer);

}  // namespace
}  // namespace warden::conformance

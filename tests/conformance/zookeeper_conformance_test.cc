// The conformance suite against zk://, on a real ZooKeeper started for each test on free
// loopback ports with temp data dirs: a standalone server, and a 3-server ensemble
// (tests/support/zookeeper_server.h).
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "conformance/backend.h"
#include "conformance/conformance_suite.h"
#include "support/zookeeper_server.h"

namespace warden::conformance {
namespace {

class ZooKeeperBackend final : public Backend {
 public:
  explicit ZooKeeperBackend(int servers) : ensemble_(testing::ZooKeeperOptions{servers}) {}

  std::string uri() const override { return ensemble_.uri(); }

  // Behind the clients' back, as an operator could: delete every request node of the
  // lock. The holders' sessions live on; only their nodes are gone.
  bool drop_grants(std::string_view group, std::string_view name) override {
    try {
      const std::string lock = testing::zk_lock_path(group, name);
      for (const std::string& child : ensemble_.children(lock)) {
        ensemble_.delete_node(lock + '/' + child);
      }
      return true;
    } catch (const std::runtime_error&) {
      return false;
    }
  }

 private:
  mutable testing::ZooKeeperEnsemble ensemble_;
};

INSTANTIATE_TEST_SUITE_P(
    ZooKeeper, Conformance,
    ::testing::Values(EngineCase{"ZooKeeperStandalone",
                                 [] { return std::make_unique<ZooKeeperBackend>(1); }},
                      EngineCase{"ZooKeeperEnsemble3",
                                 [] { return std::make_unique<ZooKeeperBackend>(3); }}),
    name_printer);

}  // namespace
}  // namespace warden::conformance

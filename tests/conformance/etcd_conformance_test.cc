// The conformance suite against etcd://, on a real etcd started for each test on free
// loopback ports with temp data dirs: a single member, and a 3-member cluster (short
// election timeouts, see tests/support/etcd_server.h).
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "conformance/backend.h"
#include "conformance/conformance_suite.h"
#include "support/etcd_server.h"

namespace warden::conformance {
namespace {

class EtcdBackend final : public Backend {
 public:
  explicit EtcdBackend(int members) : cluster_(testing::EtcdOptions{members, {}}) {}

  std::string uri() const override { return cluster_.uri(); }

  // Behind the clients' back, as an operator could: delete every request key of the
  // lock. The holders' sessions live on; only their keys are gone.
  bool drop_grants(std::string_view group, std::string_view name) override {
    try {
      cluster_.delete_prefix(testing::etcd_lock_prefix(group, name));
      return true;
    } catch (const std::runtime_error&) {
      return false;
    }
  }

 private:
  testing::EtcdCluster cluster_;
};

INSTANTIATE_TEST_SUITE_P(
    Etcd, Conformance,
    ::testing::Values(EngineCase{"EtcdSingle", [] { return std::make_unique<EtcdBackend>(1); }},
                      EngineCase{"EtcdCluster3",
                                 [] { return std::make_unique<EtcdBackend>(3); }}),
    name_printer);

}  // namespace
}  // namespace warden::conformance

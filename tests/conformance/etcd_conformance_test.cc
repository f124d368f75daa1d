// The conformance suite against etcd://, on a real etcd (one per case kind and test process) on
// free loopback ports with temp data dirs: a single member, a 3-member cluster (short election
// timeouts, see tests/support/etcd_server.h), and a single member that serves clients over mutual
// TLS only (etcds://, certificates from support/test_certs.h).
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
#include "support/etcd_server.h"
#include "support/request_queue.h"

namespace warden::conformance {
namespace {

// etcd:// queues fairly (create_revision order) and has shared mode, but no barging and
// no lock-delay (docs/engines/etcd.md); revisions survive restarts. A candidate's value
// rides in its request key's value.
constexpr Capabilities kEtcd{.shared = true,
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

class EtcdBackend final : public Backend {
 public:
  explicit EtcdBackend(int members) : cluster_(testing::EtcdOptions{members, {}}) {}
  // With TLS: uri() is etcds://…?ca=…&cert=…&key=…, and the looks behind the clients'
  // back (etcdctl) go over TLS too.
  EtcdBackend(int members, testing::EtcdTls tls)
      : cluster_(testing::EtcdOptions{members, {}}, std::move(tls)) {}

  std::string uri() const override { return cluster_.uri(); }
  bool reached_only_at_its_uri() const override { return true; }

  // Behind the clients' back, as an operator could: delete every request key of the
  // lock. The holders' sessions live on; only their keys are gone.
  bool drop_grants(std::string_view group, std::string_view name) override {
    cluster_.delete_prefix(testing::etcd_lock_prefix(group, name));
    return true;
  }

  // The lock's request keys in create_revision order ("PREFIX/w/ID" exclusive, "PREFIX/
  // s/ID" shared), less the ones that hold it.
  // A semaphore's keys ("PREFIX/p/ID", valued "warden permits K N CLIENT") hold while
  // the permits from the first one on fit in N.
  std::optional<std::size_t> queued(std::string_view group, std::string_view name) override {
    const std::string prefix = testing::etcd_lock_prefix(group, name);
    std::vector<Mode> requests;
    std::vector<unsigned> permits;
    unsigned capacity = 0;
    for (const auto& kv : cluster_.keys_by_revision(prefix)) {
      const std::string_view kind = std::string_view(kv.key).substr(prefix.size(), 2);
      if (kind == "p/") {
        unsigned k = 0;
        unsigned n = 0;
        if (std::sscanf(kv.value.c_str(), "warden permits %u %u", &k, &n) != 2) {
          throw std::runtime_error("unexpected value of " + kv.key + ": " + kv.value);
        }
        permits.push_back(k);
        capacity = n;
        continue;
      }
      if (kind != "w/" && kind != "s/") {
        throw std::runtime_error("unexpected key under the lock: " + kv.key);
      }
      requests.push_back(kind == "w/" ? Mode::exclusive : Mode::shared);
    }
    if (!permits.empty()) {
      if (!requests.empty()) throw std::runtime_error("a lock's and a semaphore's keys together");
      std::size_t holding = 0;
      for (unsigned held = 0; holding < permits.size() && held + permits[holding] <= capacity;
           ++holding) {
        held += permits[holding];
      }
      return permits.size() - holding;
    }
    return testing::waiting_requests(requests);
  }

  bool freeze() override {
    for (int m = 0; m < cluster_.size(); ++m) cluster_.pause(m);
    return true;
  }
  void thaw() override {
    for (int m = 0; m < cluster_.size(); ++m) cluster_.resume(m);
  }
  int servers_asked_in_turn() const override { return cluster_.size(); }

 private:
  testing::EtcdCluster cluster_;
};

INSTANTIATE_TEST_SUITE_P(Etcd, SemaphoreConformance,
                         ::testing::Values(EngineCase{
                             "EtcdSingle", kEtcd, [] { return std::make_unique<EtcdBackend>(1); }}),
                         name_printer);

INSTANTIATE_TEST_SUITE_P(Etcd, ElectionConformance,
                         ::testing::Values(EngineCase{
                             "EtcdSingle", kEtcd, [] { return std::make_unique<EtcdBackend>(1); }}),
                         name_printer);

INSTANTIATE_TEST_SUITE_P(
    Etcd, Conformance,
    ::testing::Values(
        EngineCase{"EtcdSingle", kEtcd, [] { return std::make_unique<EtcdBackend>(1); }},
        EngineCase{"EtcdCluster3", kEtcd, [] { return std::make_unique<EtcdBackend>(3); }},
        // Once over TLS, on one member: TLS changes the transport, not the recipe.
        EngineCase{"EtcdTls", kEtcd,
                   [] { return std::make_unique<EtcdBackend>(1, testing::EtcdTls{}); }},
        // Every lock cached: revokes come from watching the lock's keys.
        EngineCase{"EtcdCached", kEtcd, [] { return std::make_unique<EtcdBackend>(1); },
                   /*cache=*/true}),
    name_printer);

INSTANTIATE_TEST_SUITE_P(Etcd, MultiLockConformance,
                         ::testing::Values(EngineCase{
                             "EtcdSingle", kEtcd, [] { return std::make_unique<EtcdBackend>(1); }}),
                         name_printer);

}  // namespace
}  // namespace warden::conformance

// etcd:// elections as they look from outside, through etcdctl: the candidate's value sits
// in its request key's value (src/engines/etcd/request_value.h), a proclaim rewrites it in
// place (same key, lease and create_revision), a proclaim on a key someone deleted
// creates nothing, and a leader whose session is revoked hands over to the next candidate.
#include "warden/election.h"

#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compose/engine_registry.h"
#include "core/engine.h"
#include "core/uri.h"
#include "test_util.h"
#include "warden/error.h"

namespace warden::testing {
namespace {

// The one request key of the election ("g", name), as etcdctl reads it; fails the test
// if there is not exactly one.
EtcdCluster::KeyRevision only_key(EtcdCluster& cluster, const std::string& name) {
  const auto keys = cluster.keys_by_revision(etcd_lock_prefix("g", name));
  EXPECT_EQ(keys.size(), 1u) << "request keys of " << name;
  return keys.empty() ? EtcdCluster::KeyRevision{} : keys.front();
}

// etcdctl's view of one key's value (it ends what it prints with a newline).
std::string value_of(EtcdCluster& cluster, const std::string& key) {
  std::string out = cluster.etcdctl({"get", "--print-value-only", "--", key});
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Expects Leadership::proclaim to throw Error(lost).
void expect_proclaim_lost(Leadership& leading, const std::string& value) {
  try {
    leading.proclaim(value);
    ADD_FAILURE() << "a leader that lost its key proclaimed '" << value << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::lost) << e.what();
  }
}

TEST(EtcdElection, TheValueIsInTheRequestKeyAndProclaimRewritesItInPlace) {
  EtcdCluster cluster;
  Client client = Client::open(cluster.uri());
  Leadership leading = client.election("g", "e").campaign("node-a:8080", Wait::none());
  ASSERT_TRUE(leading);
  const auto before = only_key(cluster, "e");
  const std::string value = value_of(cluster, before.key);
  EXPECT_TRUE(value.starts_with("warden exclusive ")) << value;
  EXPECT_TRUE(value.ends_with(" node-a:8080")) << value;
  EXPECT_EQ(static_cast<std::uint64_t>(before.create_revision), leading.term());
  const std::string lease = lease_of(cluster, before.key);
  ASSERT_FALSE(lease.empty()) << "the candidate's key has no lease";

  leading.proclaim("node-a:9090");
  const auto after = only_key(cluster, "e");
  EXPECT_EQ(after.key, before.key) << "proclaim wrote another key";
  EXPECT_EQ(value_of(cluster, after.key),
            value.substr(0, value.size() - std::string("node-a:8080").size()) + "node-a:9090");
  EXPECT_EQ(after.create_revision, before.create_revision) << "proclaim recreated the key";
  EXPECT_EQ(lease_of(cluster, after.key), lease) << "proclaim detached the key from its session";
  EXPECT_EQ(client.election("g", "e").leader(), (Leader{"node-a:9090", leading.term()}));
  EXPECT_TRUE(client.check(leading.lease().sequencer()));

  // The session still owns the key: revoking it takes the key and the leadership along.
  cluster.etcdctl({"lease", "revoke", lease});
  EXPECT_TRUE(no_warden_keys(cluster)) << "left:" << describe(warden_keys(cluster));
}

TEST(EtcdElection, ALockRequestsValueCarriesNoCandidateValue) {
  EtcdCluster cluster;
  Client client = Client::open(cluster.uri());
  Lease held = client.lock("g", "l").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const std::string value = value_of(cluster, only_key(cluster, "l").key);
  EXPECT_TRUE(value.starts_with("warden exclusive ")) << value;
  EXPECT_EQ(value.find(' ', std::string("warden exclusive ").size()), std::string::npos)
      << "a lock's request key is valued 'warden exclusive CLIENT', as before elections: " << value;
  EXPECT_EQ(client.election("g", "l").leader(), (Leader{"", held.token()}))
      << "a lock's exclusive holder reads as a leader without a value";
}

// Keys written by clients from before elections ("warden exclusive CLIENT") read as a
// leader without a value; a value written the new way by another client reads back as is.
TEST(EtcdElection, KeysWrittenByOtherClientsReadAsTheyWereWritten) {
  EtcdCluster cluster;
  Client client = Client::open(cluster.uri());
  const std::string old_key = etcd_lock_prefix("g", "old") + "w/0123456789abcdef-0";
  cluster.etcdctl({"put", "--", old_key, "warden exclusive 0123456789abcdef"});
  const auto old_leader = client.election("g", "old").leader();
  ASSERT_TRUE(old_leader);
  EXPECT_EQ(old_leader->value, "");
  EXPECT_EQ(old_leader->term, static_cast<std::uint64_t>(only_key(cluster, "old").create_revision));

  const std::string new_key = etcd_lock_prefix("g", "new") + "w/0123456789abcdef-0";
  cluster.etcdctl({"put", "--", new_key, "warden exclusive 0123456789abcdef host b:1 c"});
  EXPECT_EQ(client.election("g", "new").leader()->value, "host b:1 c");
  EXPECT_EQ(client.inspect("g", "new").holders.at(0).value, "host b:1 c");
}

TEST(EtcdElection, AProclaimAfterTheKeyWasDeletedIsLostAndCreatesNothing) {
  EtcdCluster cluster;
  // Renewals every 10 s: the proclaim, not the watchdog, meets the missing key.
  Client client = Client::open(cluster.uri(), with_ttl(30s));
  Leadership leading = client.election("g", "e").campaign("a", Wait::none());
  ASSERT_TRUE(leading);
  cluster.delete_prefix(etcd_lock_prefix("g", "e"));

  expect_proclaim_lost(leading, "b");
  EXPECT_TRUE(lock_keys(cluster, "g", "e").empty())
      << "the proclaim recreated the key:" << describe(lock_keys(cluster, "g", "e"));
  EXPECT_EQ(client.election("g", "e").leader(), std::nullopt);
  EXPECT_NO_THROW(leading.resign());
}

// The engine itself: proclaim answers false for a key that is gone, and for a grant of
// another client built from what anyone can read, changing nothing either way.
TEST(EtcdElection, TheEngineProclaimsOnlyItsOwnKeyWhileItExists) {
  EtcdCluster cluster;
  const auto uri = core::Uri::parse(cluster.uri());
  std::unique_ptr<core::Engine> owner = compose::open_engine(uri, ClientOptions{});
  std::unique_ptr<core::Engine> stranger = compose::open_engine(uri, ClientOptions{});
  core::AcquireRequest request{
      core::LockKey{"g", "e"}, Mode::exclusive, LockOptions{}, Clock::time_point::min(), {}};
  request.options.fairness = Fairness::fifo;
  request.value = "mine";
  const auto granted = owner->acquire(request);
  ASSERT_TRUE(granted);
  const core::GrantRef& grant = granted->grant;

  EXPECT_FALSE(stranger->proclaim(grant, "forged")) << "proclaimed another client's grant";
  EXPECT_TRUE(value_of(cluster, only_key(cluster, "e").key).ends_with(" mine"));
  EXPECT_TRUE(owner->proclaim(grant, "again"));
  EXPECT_TRUE(value_of(cluster, only_key(cluster, "e").key).ends_with(" again"));

  cluster.delete_prefix(etcd_lock_prefix("g", "e"));
  EXPECT_FALSE(owner->proclaim(grant, "after the delete"));
  EXPECT_TRUE(lock_keys(cluster, "g", "e").empty()) << "the proclaim recreated the key";
  owner->release(grant);
}

TEST(EtcdElection, ALeaderWhoseSessionIsRevokedLosesAndTheNextCandidateLeads) {
  EtcdCluster cluster;
  const ClientOptions options = with_ttl(9s);
  Client a = Client::open(cluster.uri(), options);
  Client b = Client::open(cluster.uri(), options);
  Leadership first = a.election("g", "e").campaign("a", Wait::none());
  ASSERT_TRUE(first);
  const std::string session = lease_of_lock(cluster, "e");
  ASSERT_FALSE(session.empty()) << "no lease on the leader's key";
  auto second = std::async(std::launch::async,
                           [&] { return b.election("g", "e").campaign("b", Wait::up_to(30s)); });
  ASSERT_TRUE(eventually([&] { return requests(cluster, "g", "e") == 2; }))
      << "the second candidate did not queue";

  cluster.etcdctl({"lease", "revoke", session});
  Leadership next = second.get();
  ASSERT_TRUE(next) << "the next candidate was not made leader";
  EXPECT_GT(next.term(), first.term());
  EXPECT_EQ(a.election("g", "e").leader(), (Leader{"b", next.term()}));
  ASSERT_TRUE(eventually([&] { return first.lost(); }, options.lock_defaults.ttl / 3 + 2s))
      << "the old leader was not told";
  expect_proclaim_lost(first, "a again");
  EXPECT_EQ(b.election("g", "e").leader(), (Leader{"b", next.term()}))
      << "the old leader's proclaim touched the new leader's value";
  EXPECT_NO_THROW(first.resign());
  next.resign();
  EXPECT_TRUE(no_warden_keys(cluster)) << "left:" << describe(warden_keys(cluster));
}

}  // namespace
}  // namespace warden::testing

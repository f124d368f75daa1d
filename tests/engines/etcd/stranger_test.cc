// etcd:// only releases or renews a grant on one of the client's own sessions. The key
// of a grant, its token (create_revision) and its lease are all readable by anyone who can
// range the prefix; a second client that builds the holder's GrantRef from them exactly
// must still change nothing (the conformance clause tries owners it cannot know).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "compose/engine_registry.h"
#include "core/engine.h"
#include "core/uri.h"
#include "test_util.h"

namespace warden::testing {
namespace {

// The id of the one lease etcd has, in decimal, read with etcdctl ("found 1 leases",
// then its id in hex).
std::int64_t only_lease(EtcdCluster& cluster) {
  std::istringstream out(cluster.etcdctl({"lease", "list"}));
  std::string line;
  std::vector<std::string> ids;
  while (std::getline(out, line)) {
    if (!line.empty() && line.rfind("found", 0) != 0) ids.push_back(line);
  }
  EXPECT_EQ(ids.size(), 1u) << "leases: " << ids.size();
  return ids.empty() ? 0 : static_cast<std::int64_t>(std::stoull(ids.front(), nullptr, 16));
}

TEST(EtcdStranger, AGrantRefBuiltFromWhatAnyoneCanReadChangesNothing) {
  EtcdCluster cluster;
  Client holder = Client::open(cluster.uri());
  Lease lease = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);

  const auto keys = cluster.keys_by_revision("warden/");
  ASSERT_EQ(keys.size(), 1u);
  ASSERT_EQ(static_cast<std::uint64_t>(keys[0].create_revision), lease.token());
  core::GrantRef forged;
  forged.key = core::LockKey{"g", "x"};
  forged.mode = Mode::exclusive;
  forged.token = lease.token();
  forged.ttl = LockOptions{}.ttl;
  forged.owner = std::to_string(only_lease(cluster)) + ' ' + keys[0].key;

  std::unique_ptr<core::Engine> stranger =
      compose::open_engine(core::Uri::parse(cluster.uri()), ClientOptions{});
  const auto renewed = stranger->renew(std::span(&forged, 1));
  ASSERT_EQ(renewed.size(), 1u);
  EXPECT_FALSE(renewed[0].expires) << "renewed another client's grant";
  stranger->release(forged);

  EXPECT_EQ(cluster.keys_by_revision("warden/").size(), 1u) << "the holder's key was deleted";
  EXPECT_TRUE(holder.check(lease.sequencer()));
  EXPECT_FALSE(lease.lost());
  Client other = Client::open(cluster.uri());
  EXPECT_FALSE(other.lock("g", "x").acquire(Mode::exclusive, Wait::none()));
  lease.release();
  EXPECT_TRUE(cluster.keys_by_revision("warden/").empty()) << "the holder's own release";
}

}  // namespace
}  // namespace warden::testing

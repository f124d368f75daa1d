// End-to-end tests of `warden status`: the built binary against a real backend (wardend
// started on loopback by tests/support), with holders and waiters made by a Client.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "process.h"
#include "support/etcd_server.h"
#include "support/redis_masters.h"
#include "support/redis_server.h"
#include "support/server_process.h"
#include "support/waiting.h"
#include "support/wardend_cell.h"
#include "support/zookeeper_server.h"
#include "warden/client.h"

namespace warden::cli::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

Outcome status(const std::vector<std::string>& args) {
  std::vector<std::string> argv{WARDEN_CLI_PATH, "status"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, environment({"WARDEN_URL"}), 60s);
}

// One exclusive holder, then a shared and an exclusive waiter queued behind it, in
// that order; the waiters give up when the scene ends.
class Scene {
 public:
  explicit Scene(const Client& client) : client_(client) {
    lease_ = client_.lock("billing", "invoice-7").acquire(Mode::exclusive, Wait::none());
    EXPECT_TRUE(lease_);
    wait_behind(Mode::shared, 1);
    wait_behind(Mode::exclusive, 2);
  }
  ~Scene() {
    for (auto& t : waiters_) t.request_stop();
  }
  std::uint64_t token() const { return lease_.token(); }

 private:
  void wait_behind(Mode mode, std::size_t queued) {
    waiters_.emplace_back([this, mode](std::stop_token stop) {
      auto lease = client_.lock("billing", "invoice-7").acquire(mode, Wait::forever(), stop);
    });
    ASSERT_TRUE(warden::testing::eventually(
        [&] { return client_.inspect("billing", "invoice-7").waiters.size() == queued; }, 20s));
  }

  Client client_;
  Lease lease_;
  std::vector<std::jthread> waiters_;
};

class StatusOnWardend : public ::testing::Test {
 protected:
  warden::testing::Wardend server_;
};

TEST_F(StatusOnWardend, ShowsTheHolderAndTwoWaitersInQueueOrder) {
  Client client = Client::open(server_.uri());
  Scene scene(client);
  const Outcome out = status({"--url", server_.uri(), "--group", "billing", "--name", "invoice-7"});
  ASSERT_EQ(out.status, 0) << out.err;
  EXPECT_NE(out.out.find("lock billing/invoice-7"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("holders (1)"), std::string::npos) << out.out;
  EXPECT_TRUE(std::regex_search(
      out.out, std::regex("\\n +exclusive +" + std::to_string(scene.token()) + " +[0-9]+\\n")))
      << out.out;
  const auto waiters = out.out.find("waiters, in queue order (2)");
  ASSERT_NE(waiters, std::string::npos) << out.out;
  const auto shared = out.out.find("shared", waiters);
  const auto exclusive = out.out.find("exclusive", waiters);
  EXPECT_LT(shared, exclusive) << out.out;
}

TEST_F(StatusOnWardend, JsonKeepsItsShape) {
  Client client = Client::open(server_.uri());
  Scene scene(client);
  const Outcome out =
      status({"--url", server_.uri(), "--group", "billing", "--name", "invoice-7", "--json"});
  ASSERT_EQ(out.status, 0) << out.err;
  const json j = json::parse(out.out);
  EXPECT_EQ(j["url"], server_.uri());
  EXPECT_EQ(j["lock"], "billing/invoice-7");
  ASSERT_EQ(j["holders"].size(), 1u);
  EXPECT_EQ(j["holders"][0]["mode"], "exclusive");
  EXPECT_EQ(j["holders"][0]["token"], scene.token());
  EXPECT_GT(j["holders"][0]["ttl_left_ms"].get<long long>(), 0);
  ASSERT_EQ(j["waiters"].size(), 2u);
  EXPECT_EQ(j["waiters"][0]["mode"], "shared");
  EXPECT_EQ(j["waiters"][1]["mode"], "exclusive");
  EXPECT_TRUE(j["waiters"][0]["deadline_left_ms"].is_null());  // waits forever
  EXPECT_EQ(j["lock_delay_left_ms"], 0);
}

TEST_F(StatusOnWardend, ListsTheGroupsLocksWithCounts) {
  Client client = Client::open(server_.uri());
  Scene scene(client);
  auto a = client.lock("billing", "a").acquire(Mode::shared, Wait::none());
  auto b = client.lock("billing", "zz").acquire(Mode::exclusive, Wait::none());
  auto other = client.lock("other", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(a && b && other);

  const Outcome text = status({"--url", server_.uri(), "--group", "billing"});
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("group billing: 3 locks"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("other"), std::string::npos) << text.out;

  const Outcome out = status({"--url", server_.uri(), "--group", "billing", "--json"});
  ASSERT_EQ(out.status, 0) << out.err;
  const json j = json::parse(out.out);
  EXPECT_EQ(j["group"], "billing");
  const json want = json::array({{{"name", "a"}, {"holders", 1}, {"waiters", 0}},
                                 {{"name", "invoice-7"}, {"holders", 1}, {"waiters", 2}},
                                 {{"name", "zz"}, {"holders", 1}, {"waiters", 0}}});
  EXPECT_EQ(j["locks"], want);
}

TEST_F(StatusOnWardend, AStoppedServerExits69) {
  const std::string uri = server_.uri();
  server_.process().stop(SIGTERM);
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--url", uri, "--group", "billing", "--name", "invoice-7"},
           {"--url", uri, "--group", "billing"}}) {
    const Outcome out = status(args);
    EXPECT_EQ(out.status, 69) << out.err;
    EXPECT_NE(out.err.find("unavailable"), std::string::npos) << out.err;
  }
}

// A cell's URL may list a follower first: its INFO is the leader's, which names the cell;
// a lock's status goes through the client, which finds the leader as well.
TEST(StatusOnACell, ShowsTheLeadersInfoAndALockFromAnyMember) {
  warden::testing::WardendCell cell;
  const std::size_t leader = cell.wait_for_leader();
  std::string url = "warden://";
  for (std::size_t k = 1; k <= cell.size(); ++k) {
    url += (k > 1 ? "," : "") + std::string("127.0.0.1:") +
           std::to_string(cell.port((leader + k) % cell.size()));
  }
  const Outcome info = status({"--url", url});
  ASSERT_EQ(info.status, 0) << info.err;
  EXPECT_NE(info.out.find("cell_leader"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("127.0.0.1:" + std::to_string(cell.port(leader))), std::string::npos)
      << info.out;

  const Client client = Client::open(url);
  Lease held = client.lock("billing", "invoice-7").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const Outcome lock = status({"--url", url, "--group", "billing", "--name", "invoice-7"});
  ASSERT_EQ(lock.status, 0) << lock.err;
  EXPECT_NE(lock.out.find(std::to_string(held.token())), std::string::npos) << lock.out;
}

TEST(Status, BadInputExits64WithAClearMessage) {
  const struct {
    std::vector<std::string> args;
    const char* says;
  } cases[] = {
      {{"--url", "mem://", "--group", "a/b", "--name", "n"}, "group"},
      {{"--url", "mem://", "--group", "g", "--name", ""}, "name"},
      {{"--url", "mem://", "--name", "n"}, "needs --group"},
      {{"--url", "not a uri", "--group", "g"}, "--url"},
      {{"--url", "nosuch://x", "--group", "g"}, "nosuch"},
      {{"--url", "mem://"}, "--group"},
  };
  for (const auto& c : cases) {
    const Outcome out = status(c.args);
    EXPECT_EQ(out.status, 64) << c.args[1] << ": " << out.err;
    EXPECT_NE(out.err.find(c.says), std::string::npos) << out.err;
  }
}

TEST(Status, AFreshMemTableIsEmpty) {
  const Outcome one = status({"--url", "mem://", "--group", "g", "--name", "n", "--json"});
  ASSERT_EQ(one.status, 0) << one.err;
  const json j = json::parse(one.out);
  EXPECT_TRUE(j["holders"].empty());
  EXPECT_TRUE(j["waiters"].empty());
  const Outcome all = status({"--url", "mem://", "--group", "g"});
  ASSERT_EQ(all.status, 0) << all.err;
  EXPECT_NE(all.out.find("group g: 0 locks"), std::string::npos) << all.out;
}

// One exclusive holder, shown by `warden status --json` on an engine other than wardend.
void expect_one_holder(const std::string& uri) {
  Client client = Client::open(uri);
  Lease lease = client.lock("billing", "invoice-7").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  const Outcome out = status({"--url", uri, "--group", "billing", "--name", "invoice-7", "--json"});
  ASSERT_EQ(out.status, 0) << out.err;
  const json j = json::parse(out.out);
  ASSERT_EQ(j["holders"].size(), 1u) << out.out;
  EXPECT_EQ(j["holders"][0]["mode"], "exclusive");
  EXPECT_EQ(j["holders"][0]["token"], lease.token());
  EXPECT_TRUE(j["waiters"].empty());
  const Outcome group = status({"--url", uri, "--group", "billing", "--json"});
  ASSERT_EQ(group.status, 0) << group.err;
  EXPECT_EQ(json::parse(group.out)["locks"],
            json::array({{{"name", "invoice-7"}, {"holders", 1}, {"waiters", 0}}}));
}

TEST(StatusOnOtherEngines, Redis) {
  warden::testing::RedisServer server;
  expect_one_holder(server.uri());
}

TEST(StatusOnOtherEngines, Etcd) {
  warden::testing::EtcdCluster cluster;
  expect_one_holder(cluster.uri());
}

TEST(StatusOnOtherEngines, Redlock) {
  warden::testing::RedisMasters masters(3);
  expect_one_holder(masters.uri());
}

TEST(StatusOnOtherEngines, ZooKeeper) {
  warden::testing::ZooKeeperEnsemble zk;
  expect_one_holder(zk.uri());
}

}  // namespace
}  // namespace warden::cli::testing

// engines/resp_client/cluster_slots.h against a real Redis Cluster (RedisClusterGroup):
// what a node sends parses into a full slot map, key_slot agrees with the server's
// CLUSTER KEYSLOT, and a real MOVED parses into the redirect a client must follow.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "engines/resp_client/cluster_slots.h"
#include "engines/resp_client/hiredis_reply.h"
#include "engines/resp_client/reply.h"
#include "support/redis_cluster.h"

namespace warden::engines::resp_client {
namespace {

// One command to 127.0.0.1:port over a direct hiredis connection, its reply as a Reply.
Reply ask_node(std::uint16_t port, const std::vector<std::string>& args) {
  const std::unique_ptr<redisContext, decltype(&redisFree)> c(redisConnect("127.0.0.1", port),
                                                              &redisFree);
  if (!c || c->err != 0) {
    ADD_FAILURE() << "cannot connect to " << port;
    return nil_reply();
  }
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  const std::unique_ptr<redisReply, decltype(&freeReplyObject)> r(
      static_cast<redisReply*>(
          redisCommandArgv(c.get(), static_cast<int>(argv.size()), argv.data(), lens.data())),
      &freeReplyObject);
  if (!r) {
    ADD_FAILURE() << "no reply from " << port;
    return nil_reply();
  }
  return from_hiredis(*r);
}

// 200 keys of random bytes (braces likely, NUL possible), a third of them as
// "prefix{tag}suffix", some with empty or unclosed tags.
std::vector<std::string> random_keys() {
  std::mt19937 rng(20261115);
  const std::string alphabet = std::string("abcxyz019{}{}:._-\xff", 18) + std::string(1, '\0');
  const auto word = [&](int max) {
    std::string w;
    const int n = std::uniform_int_distribution<int>(0, max)(rng);
    for (int i = 0; i < n; ++i) {
      w += alphabet[std::uniform_int_distribution<std::size_t>(0, alphabet.size() - 1)(rng)];
    }
    return w;
  };
  std::vector<std::string> keys = {"foo", "{}", "{}{a}", "a{", "{user1000}.following"};
  while (keys.size() < 200) {
    switch (keys.size() % 3) {
      case 0:
        keys.push_back(word(12) + "{" + word(6) + "}" + word(6));
        break;
      case 1:
        keys.push_back(word(16));
        break;
      default:
        keys.push_back("{warden:" + word(8) + "/" + word(8) + "}:q");
    }
  }
  return keys;
}

TEST(ClusterSlotsLive, ARealSlotTableCoversEverySlotWithTheClustersMasters) {
  testing::RedisClusterGroup cluster;
  for (const std::uint16_t port : cluster.node_ports()) {
    const std::vector<SlotRange> ranges =
        parse_cluster_slots(ask_node(port, {"CLUSTER", "SLOTS"}), "127.0.0.1");
    int next = 0;
    for (const SlotRange& r : ranges) {
      EXPECT_EQ(r.first, next) << "node " << port;
      EXPECT_EQ(r.host, "127.0.0.1");
      next = r.last + 1;
    }
    EXPECT_EQ(next, 16384) << "node " << port;

    const SlotMap map(ranges);
    EXPECT_EQ(map.uncovered(), 0u);
    std::vector<Endpoint> masters;
    for (const std::uint16_t m : cluster.master_ports()) masters.push_back({"127.0.0.1", m});
    EXPECT_EQ(map.nodes(), masters);
    for (const int slot : {0, 5000, 12182, 16383}) {
      EXPECT_EQ(map.endpoint_for(static_cast<std::uint16_t>(slot))->port,
                cluster.master_port_for_slot(slot));
    }
  }
}

TEST(ClusterSlotsLive, KeySlotAgreesWithTheServerForRandomKeys) {
  testing::RedisClusterGroup cluster;
  const std::uint16_t port = cluster.node_ports().front();
  for (const std::string& key : random_keys()) {
    const Reply server = ask_node(port, {"CLUSTER", "KEYSLOT", key});
    ASSERT_TRUE(server.is_integer()) << server.describe();
    EXPECT_EQ(key_slot(key), server.integer) << Reply{Reply::Type::bulk, 0, key, {}}.describe();
  }
}

TEST(ClusterSlotsLive, ARealMovedParsesIntoTheRedirectThatUpdatesTheMap) {
  testing::RedisClusterGroup cluster;
  const std::uint16_t slot = key_slot("foo");
  const std::uint16_t owner = cluster.master_port_for_slot(slot);
  std::uint16_t other = 0;
  for (const std::uint16_t m : cluster.master_ports()) {
    if (m != owner) other = m;
  }
  SlotMap map(parse_cluster_slots(ask_node(other, {"CLUSTER", "SLOTS"})));

  const std::uint16_t to = other;
  cluster.migrate_slot(slot, to);
  const Reply reply = ask_node(owner, {"GET", "foo"});
  ASSERT_TRUE(reply.is_error()) << reply.describe();
  const std::optional<Redirect> redirect = parse_redirect(reply.text);
  ASSERT_TRUE(redirect) << reply.text;
  EXPECT_EQ(*redirect, (Redirect{Redirect::moved, slot, "127.0.0.1", to}));
  EXPECT_EQ(map.endpoint_for(slot)->port, owner);
  EXPECT_TRUE(map.apply(*redirect));
  EXPECT_EQ(map.endpoint_for(slot)->port, to);
  EXPECT_EQ(parse_redirect(ask_node(owner, {"CLUSTER", "NOSUCH"}).text), std::nullopt)
      << "another error is no redirect";
}

}  // namespace
}  // namespace warden::engines::resp_client

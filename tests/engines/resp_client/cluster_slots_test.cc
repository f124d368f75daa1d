// Where a key lives in a Redis Cluster (engines/resp_client/cluster_slots.h): the slot
// function against values a Redis 7.0 server computes with CLUSTER KEYSLOT, what
// CLUSTER SLOTS and MOVED/ASK replies parse into, the malformed ones refused, and a
// SlotMap following MOVED. No server: cluster_slots_live_test.cc checks against one.
#include "engines/resp_client/cluster_slots.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engines/resp_client/reply.h"
#include "warden/error.h"

namespace warden::engines::resp_client {
namespace {

using namespace std::string_literals;

// The CLUSTER SLOTS entry for master host:port serving first..last, with one replica.
Reply entry(std::int64_t first, std::int64_t last, std::string host, std::int64_t port) {
  return array_reply(
      {integer_reply(first), integer_reply(last),
       array_reply({bulk_reply(std::move(host)), integer_reply(port),
                    bulk_reply("9f3c0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b"), array_reply({})}),
       array_reply({bulk_reply("127.0.0.1"), integer_reply(port + 100),
                    bulk_reply("0123456789abcdef0123456789abcdef01234567")})});
}

Reply three_masters() {
  return array_reply({entry(5461, 10922, "127.0.0.1", 7001), entry(0, 5460, "127.0.0.1", 7000),
                      entry(10923, 16383, "127.0.0.1", 7002)});
}

// The message of the Error(internal) parse_cluster_slots throws; fails the test if it
// accepts the reply or throws another code.
std::string slots_error(const Reply& reply) {
  try {
    parse_cluster_slots(reply);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::internal) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "accepted " << reply.describe();
  return "";
}

std::string redirect_error(std::string_view message) {
  try {
    parse_redirect(message);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::internal) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "accepted " << message;
  return "";
}

TEST(KeySlot, MatchesTheServersSlotsForPlainKeys) {
  // Each value as redis-server 7.0 answers CLUSTER KEYSLOT.
  EXPECT_EQ(key_slot("foo"), 12182);
  EXPECT_EQ(key_slot("bar"), 5061);
  EXPECT_EQ(key_slot("hello"), 866);
  EXPECT_EQ(key_slot("somekey"), 11058);
  EXPECT_EQ(key_slot("123456789"), 0x31C3);  // CRC16/XMODEM's check value, below 16384
  EXPECT_EQ(key_slot(""), 0);
}

TEST(KeySlot, HashesOnlyTheTagWhenTheKeyHasOne) {
  EXPECT_EQ(key_slot("{user1000}.following"), 3443);
  EXPECT_EQ(key_slot("{user1000}.followers"), key_slot("{user1000}.following"));
  EXPECT_EQ(key_slot("foo{hash_tag}"), 2515);
  EXPECT_EQ(key_slot("foo{bar}{zap}"), key_slot("bar"));  // the first tag only
  EXPECT_EQ(key_slot("{bar}"), key_slot("bar"));
  EXPECT_EQ(key_slot("}{a}"), key_slot("a"));  // a '}' before the first '{' is no close
}

TEST(KeySlot, EmptyOrUnclosedTagsHashTheWholeKey) {
  EXPECT_EQ(key_slot("{}"), 15257);
  EXPECT_EQ(key_slot("{}foo"), 9500);
  EXPECT_EQ(key_slot("foo{}{bar}"), 8363);  // the first '{' opens an empty tag: whole key
  EXPECT_EQ(key_slot("foo{"), 7673);
  EXPECT_EQ(key_slot("{a"), 10276);
  EXPECT_EQ(key_slot("a}"), 5921);
}

TEST(KeySlot, TheTagEndsAtTheFirstCloseAfterTheFirstOpen) {
  EXPECT_EQ(key_slot("foo{{bar}}zap"), 4015);
  EXPECT_EQ(key_slot("foo{{bar}}zap"), key_slot("{bar"));
}

TEST(KeySlot, HashesEveryByteIncludingNul) {
  EXPECT_NE(key_slot("a\0b"s), key_slot("a"));
  EXPECT_EQ(key_slot("{a\0b}x"s), key_slot("a\0b"s));
  EXPECT_LT(key_slot("\xff\xfe\x80"), kClusterSlots);
}

TEST(ParseClusterSlots, ReadsMastersSortedBySlot) {
  const std::vector<SlotRange> ranges = parse_cluster_slots(three_masters());
  ASSERT_EQ(ranges.size(), 3u);
  EXPECT_EQ(ranges[0], (SlotRange{0, 5460, "127.0.0.1", 7000}));
  EXPECT_EQ(ranges[1], (SlotRange{5461, 10922, "127.0.0.1", 7001}));
  EXPECT_EQ(ranges[2], (SlotRange{10923, 16383, "127.0.0.1", 7002}));
}

TEST(ParseClusterSlots, AcceptsAnEmptyReplyAndMastersWithoutIdOrReplicas) {
  EXPECT_TRUE(parse_cluster_slots(array_reply({})).empty());
  const Reply bare =
      array_reply({array_reply({integer_reply(7), integer_reply(7),
                                array_reply({bulk_reply("::1"), integer_reply(6379)})})});
  EXPECT_EQ(parse_cluster_slots(bare), (std::vector<SlotRange>{{7, 7, "::1", 6379}}));
}

TEST(ParseClusterSlots, AnEmptyHostIsTheAskedNode) {
  const Reply reply = array_reply({entry(0, 16383, "", 7000)});
  EXPECT_EQ(parse_cluster_slots(reply, "10.0.0.5"),
            (std::vector<SlotRange>{{0, 16383, "10.0.0.5", 7000}}));
  EXPECT_NE(slots_error(reply).find("host is empty"), std::string::npos);
}

TEST(ParseClusterSlots, RefusesWhatIsNotASlotTable) {
  EXPECT_NE(slots_error(error_reply("ERR This instance has cluster support disabled"))
                .find("not an array"),
            std::string::npos);
  EXPECT_NE(slots_error(nil_reply()).find("not an array"), std::string::npos);
  EXPECT_NE(slots_error(array_reply({integer_reply(1)})).find("entry 0"), std::string::npos);
  EXPECT_NE(
      slots_error(array_reply({array_reply({integer_reply(0), integer_reply(1)})})).find("entry 0"),
      std::string::npos);
}

TEST(ParseClusterSlots, RefusesBadSlotNumbers) {
  EXPECT_NE(slots_error(array_reply({entry(-1, 10, "h", 1)})).find("first slot"),
            std::string::npos);
  EXPECT_NE(slots_error(array_reply({entry(0, 16384, "h", 1)})).find("last slot"),
            std::string::npos);
  EXPECT_NE(slots_error(array_reply({entry(10, 9, "h", 1)})).find("first slot > last slot"),
            std::string::npos);
  Reply text_slot = entry(0, 10, "h", 1);
  text_slot.elements[0] = bulk_reply("0");
  EXPECT_NE(slots_error(array_reply({text_slot})).find("first slot"), std::string::npos);
}

TEST(ParseClusterSlots, RefusesOverlappingRanges) {
  const std::string message = slots_error(
      array_reply({entry(100, 200, "h", 1), entry(0, 100, "h", 2), entry(300, 400, "h", 3)}));
  EXPECT_NE(message.find("0-100 and 100-200 overlap"), std::string::npos) << message;
}

TEST(ParseClusterSlots, RefusesBadMasters) {
  Reply no_port = entry(0, 1, "h", 1);
  no_port.elements[2] = array_reply({bulk_reply("h")});
  EXPECT_NE(slots_error(array_reply({no_port})).find("master is not"), std::string::npos);
  Reply int_host = entry(0, 1, "h", 1);
  int_host.elements[2].elements[0] = integer_reply(127);
  EXPECT_NE(slots_error(array_reply({int_host})).find("host is not a string"), std::string::npos);
  EXPECT_NE(slots_error(array_reply({entry(0, 1, "?", 1)})).find("unknown"), std::string::npos);
  EXPECT_NE(slots_error(array_reply({entry(0, 1, "h", 0)})).find("port"), std::string::npos);
  EXPECT_NE(slots_error(array_reply({entry(0, 1, "h", 65536)})).find("port"), std::string::npos);
  Reply nil_master = entry(0, 1, "h", 1);
  nil_master.elements[2] = nil_reply();
  EXPECT_NE(slots_error(array_reply({nil_master})).find("master is not"), std::string::npos);
}

TEST(ParseRedirect, ReadsMovedAndAsk) {
  EXPECT_EQ(parse_redirect("MOVED 3999 127.0.0.1:6381"),
            (Redirect{Redirect::moved, 3999, "127.0.0.1", 6381}));
  EXPECT_EQ(parse_redirect("ASK 3999 127.0.0.1:6381"),
            (Redirect{Redirect::ask, 3999, "127.0.0.1", 6381}));
  EXPECT_EQ(parse_redirect("MOVED 0 redis-1.example:1"),
            (Redirect{Redirect::moved, 0, "redis-1.example", 1}));
  EXPECT_EQ(parse_redirect("ASK 16383 h:65535"), (Redirect{Redirect::ask, 16383, "h", 65535}));
}

TEST(ParseRedirect, ReadsIpv6WithAndWithoutBrackets) {
  EXPECT_EQ(parse_redirect("MOVED 3999 [::1]:6381"),
            (Redirect{Redirect::moved, 3999, "::1", 6381}));
  EXPECT_EQ(parse_redirect("ASK 3999 ::1:6381"), (Redirect{Redirect::ask, 3999, "::1", 6381}));
  EXPECT_EQ(parse_redirect("MOVED 1 [fe80::1:2]:7000")->endpoint().to_string(), "[fe80::1:2]:7000");
}

TEST(ParseRedirect, KeepsAnEmptyHostForTheCallerToResolve) {
  EXPECT_EQ(parse_redirect("MOVED 12 :6380"), (Redirect{Redirect::moved, 12, "", 6380}));
}

TEST(ParseRedirect, OtherErrorsAreNoRedirect) {
  EXPECT_EQ(parse_redirect("ERR unknown command"), std::nullopt);
  EXPECT_EQ(parse_redirect("TRYAGAIN Multiple keys request during rehashing of slot"),
            std::nullopt);
  EXPECT_EQ(parse_redirect("CLUSTERDOWN The cluster is down"), std::nullopt);
  EXPECT_EQ(parse_redirect("MOVEDX 1 h:1"), std::nullopt);
  EXPECT_EQ(parse_redirect("moved 1 h:1"), std::nullopt);  // code words are upper case
  EXPECT_EQ(parse_redirect(""), std::nullopt);
}

TEST(ParseRedirect, RefusesMalformedMovedAndAsk) {
  EXPECT_NE(redirect_error("MOVED").find("no slot"), std::string::npos);
  EXPECT_NE(redirect_error("ASK 12").find("no endpoint"), std::string::npos);
  EXPECT_NE(redirect_error("MOVED x h:1").find("slot"), std::string::npos);
  EXPECT_NE(redirect_error("MOVED -1 h:1").find("slot"), std::string::npos);
  EXPECT_NE(redirect_error("MOVED 16384 h:1").find("slot"), std::string::npos);
  EXPECT_NE(redirect_error("MOVED 99999999999999999999 h:1").find("slot"), std::string::npos);
  EXPECT_NE(redirect_error("MOVED 1 host").find("no port"), std::string::npos);
  EXPECT_NE(redirect_error("MOVED 1 h:0").find("port"), std::string::npos);
  EXPECT_NE(redirect_error("MOVED 1 h:65536").find("port"), std::string::npos);
  EXPECT_NE(redirect_error("MOVED 1 h:12x").find("port"), std::string::npos);
  EXPECT_NE(redirect_error("MOVED 1 h:").find("port"), std::string::npos);
  EXPECT_NE(redirect_error("MOVED 1 [::1:6381").find("brackets"), std::string::npos);
  EXPECT_NE(redirect_error("MOVED 1 h:1 extra:2").find("space"), std::string::npos);
}

TEST(SlotMap, RoutesEachSlotToItsRangesMaster) {
  const SlotMap map(parse_cluster_slots(three_masters()));
  EXPECT_EQ(map.endpoint_for(0), (Endpoint{"127.0.0.1", 7000}));
  EXPECT_EQ(map.endpoint_for(5460), (Endpoint{"127.0.0.1", 7000}));
  EXPECT_EQ(map.endpoint_for(5461), (Endpoint{"127.0.0.1", 7001}));
  EXPECT_EQ(map.endpoint_for(key_slot("foo")), (Endpoint{"127.0.0.1", 7002}));
  EXPECT_EQ(map.uncovered(), 0u);
  EXPECT_EQ(map.nodes(),
            (std::vector<Endpoint>{{"127.0.0.1", 7000}, {"127.0.0.1", 7001}, {"127.0.0.1", 7002}}));
}

TEST(SlotMap, LeavesUncoveredSlotsUnknown) {
  const SlotMap empty;
  EXPECT_EQ(empty.endpoint_for(0), std::nullopt);
  EXPECT_EQ(empty.uncovered(), 16384u);
  EXPECT_TRUE(empty.nodes().empty());

  const SlotMap partial({{10, 19, "h", 1}});
  EXPECT_EQ(partial.endpoint_for(9), std::nullopt);
  EXPECT_EQ(partial.endpoint_for(10), (Endpoint{"h", 1}));
  EXPECT_EQ(partial.endpoint_for(20), std::nullopt);
  EXPECT_EQ(partial.uncovered(), 16384u - 10u);
}

TEST(SlotMap, MovedRoutesThatSlotToTheNewMaster) {
  SlotMap map(parse_cluster_slots(three_masters()));
  const std::uint16_t slot = key_slot("foo");
  EXPECT_TRUE(map.apply(*parse_redirect("MOVED 12182 127.0.0.1:7000")));
  EXPECT_EQ(map.endpoint_for(slot), (Endpoint{"127.0.0.1", 7000}));
  EXPECT_EQ(map.endpoint_for(slot - 1), (Endpoint{"127.0.0.1", 7002}));  // neighbours stay
  EXPECT_EQ(map.endpoint_for(slot + 1), (Endpoint{"127.0.0.1", 7002}));
  EXPECT_FALSE(map.apply(*parse_redirect("MOVED 12182 127.0.0.1:7000")));  // already so
}

TEST(SlotMap, MovedToANewNodeAddsItAndANodeWithoutSlotsDisappears) {
  SlotMap map({{0, 0, "a", 1}, {1, 16383, "b", 2}});
  EXPECT_TRUE(map.apply(Redirect{Redirect::moved, 5, "c", 3}));
  EXPECT_EQ(map.nodes(), (std::vector<Endpoint>{{"a", 1}, {"b", 2}, {"c", 3}}));
  EXPECT_TRUE(map.apply(Redirect{Redirect::moved, 0, "b", 2}));
  EXPECT_EQ(map.nodes(), (std::vector<Endpoint>{{"b", 2}, {"c", 3}}));
  EXPECT_TRUE(map.apply(Redirect{Redirect::moved, 1, "d", 4}));  // reuses a's place
  EXPECT_EQ(map.nodes(), (std::vector<Endpoint>{{"b", 2}, {"c", 3}, {"d", 4}}));
  EXPECT_EQ(map.endpoint_for(0), (Endpoint{"b", 2}));
  EXPECT_EQ(map.endpoint_for(1), (Endpoint{"d", 4}));
  EXPECT_EQ(map.endpoint_for(5), (Endpoint{"c", 3}));
  EXPECT_EQ(map.endpoint_for(6), (Endpoint{"b", 2}));
}

TEST(SlotMap, MovedFillsAnUncoveredSlot) {
  SlotMap map;
  EXPECT_TRUE(map.apply(Redirect{Redirect::moved, 16383, "h", 9}));
  EXPECT_EQ(map.endpoint_for(16383), (Endpoint{"h", 9}));
  EXPECT_EQ(map.uncovered(), 16383u);
}

TEST(SlotMap, AskChangesNothing) {
  SlotMap map(parse_cluster_slots(three_masters()));
  EXPECT_FALSE(map.apply(*parse_redirect("ASK 12182 127.0.0.1:7000")));
  EXPECT_EQ(map.endpoint_for(12182), (Endpoint{"127.0.0.1", 7002}));
}

TEST(SlotMap, RefusesRedirectsItCannotFollowAndKeepsItsRoutes) {
  SlotMap map(parse_cluster_slots(three_masters()));
  const auto refused = [&](const Redirect& r) {
    try {
      map.apply(r);
      ADD_FAILURE() << "applied a redirect to " << r.endpoint().to_string();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::internal) << e.what();
    }
  };
  refused(Redirect{Redirect::moved, 16384, "h", 1});
  refused(Redirect{Redirect::moved, 1, "", 6380});
  refused(Redirect{Redirect::moved, 1, "h", 0});
  EXPECT_EQ(map.endpoint_for(1), (Endpoint{"127.0.0.1", 7000}));
  EXPECT_EQ(map.nodes().size(), 3u);
}

TEST(SlotMap, RefusesBadRangesAndSlots) {
  const auto internal = [](const std::vector<SlotRange>& ranges) {
    try {
      SlotMap map(ranges);
      ADD_FAILURE() << "built a map";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::internal) << e.what();
    }
  };
  internal({{0, 16384, "h", 1}});
  internal({{5, 4, "h", 1}});
  internal({{0, 1, "", 1}});
  internal({{0, 1, "h", 0}});
  internal({{0, 10, "h", 1}, {10, 20, "h", 2}});
  try {
    SlotMap().endpoint_for(16384);
    ADD_FAILURE() << "answered for slot 16384";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
  }
}

}  // namespace
}  // namespace warden::engines::resp_client

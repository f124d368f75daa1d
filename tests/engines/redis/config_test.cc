// redis://, redis+sentinel:// and redis+cluster:// URIs: what each part means, and a clear
// invalid_argument for what is wrong, before anything is connected.
#include <gtest/gtest.h>

#include <string>

#include "core/uri.h"
#include "engines/redis/redis_config.h"
#include "warden/error.h"

namespace warden::engines::redis {
namespace {

RedisConfig parse(const std::string& text) {
  return parse_config(core::Uri::parse(text), ClientOptions{});
}

std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "accepted " << text;
  return "";
}

TEST(RedisConfig, ASentinelUriNamesTheSentinelsTheMasterAndTheDatabase) {
  const RedisConfig config = parse(
      "redis+sentinel://u:p@s1:5000,s2,[::1]:5002/main-1/3?sentinel_user=su&"
      "sentinel_password=sp&min_replicas=2&replica_timeout_ms=250");
  ASSERT_TRUE(config.sentinel);
  EXPECT_EQ(config.sentinel->master_name, "main-1");
  ASSERT_EQ(config.sentinel->sentinels.size(), 3u);
  EXPECT_EQ(config.sentinel->sentinels[0].host, "s1");
  EXPECT_EQ(config.sentinel->sentinels[0].port, 5000);
  EXPECT_EQ(config.sentinel->sentinels[1].port, kDefaultSentinelPort);
  EXPECT_EQ(config.sentinel->sentinels[2].host, "::1");
  EXPECT_EQ(config.sentinel->user, "su");
  EXPECT_EQ(config.sentinel->password, "sp");
  EXPECT_EQ(config.connect.user, "u");
  EXPECT_EQ(config.connect.password, "p");
  EXPECT_EQ(config.connect.db, 3);
  EXPECT_EQ(config.min_replicas, 2);
  EXPECT_EQ(config.replica_timeout.count(), 250);
}

TEST(RedisConfig, APlainUriHasNoSentinelsAndNoWait) {
  const RedisConfig config = parse("redis://h:7000/2");
  EXPECT_FALSE(config.sentinel);
  EXPECT_EQ(config.connect.port, 7000);
  EXPECT_EQ(config.connect.db, 2);
  EXPECT_EQ(config.min_replicas, 0);
}

TEST(RedisConfig, BadSentinelUrisAreInvalidArguments) {
  EXPECT_NE(error_of("redis+sentinel://s1,s2").find("no master name"), std::string::npos);
  EXPECT_NE(error_of("redis+sentinel://s1/ma%20ster").find("master name"), std::string::npos);
  EXPECT_NE(error_of("redis+sentinel://s1/m/").find("empty database"), std::string::npos);
  EXPECT_NE(error_of("redis+sentinel://s1/m/x").find("database"), std::string::npos);
  EXPECT_NE(error_of("redis+sentinel://s1/m?sentinel_user=u").find("sentinel_password"),
            std::string::npos);
  EXPECT_NE(error_of("redis+sentinel://s1/m?sentinel_password=").find("empty"), std::string::npos);
  EXPECT_NE(error_of("redis://h?sentinel_user=u").find("unknown parameter"), std::string::npos);
  EXPECT_NE(error_of("redis://h1,h2").find("more than one host"), std::string::npos);
}

TEST(RedisConfig, MinReplicasIsCheckedAndItsTimeoutNeedsIt) {
  EXPECT_NE(error_of("redis://h?min_replicas=0").find("min_replicas"), std::string::npos);
  EXPECT_NE(error_of("redis://h?min_replicas=17").find("min_replicas"), std::string::npos);
  EXPECT_NE(error_of("redis://h?replica_timeout_ms=100").find("needs min_replicas"),
            std::string::npos);
  EXPECT_NE(error_of("redis://h?min_replicas=1&replica_timeout_ms=0").find("replica_timeout_ms"),
            std::string::npos);
}

TEST(RedisConfig, WaitLinesAreBoundedAndNotOfferedOnACluster) {
  EXPECT_EQ(parse("redis://h").wait_lines, kDefaultWaitLines);
  EXPECT_EQ(parse("redis://h?wait_lines=0").wait_lines, 0u);
  EXPECT_EQ(parse("redis+sentinel://s1/m?wait_lines=256").wait_lines, 256u);
  EXPECT_NE(error_of("redis://h?wait_lines=257").find("wait_lines"), std::string::npos);
  EXPECT_NE(error_of("redis://h?wait_lines=-1").find("wait_lines"), std::string::npos);
  EXPECT_NE(error_of("redis://h?wait_lines=x").find("wait_lines"), std::string::npos);
  EXPECT_NE(error_of("redis+cluster://h1,h2?wait_lines=4").find("not offered on redis+cluster"),
            std::string::npos);
}

}  // namespace
}  // namespace warden::engines::redis

// mysql:// URIs: what parses, and bad input refused as invalid_argument before any I/O.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/uri.h"
#include "engines/mysql/mysql_config.h"
#include "warden/error.h"

namespace warden::engines::mysql {
namespace {

MysqlConfig parse(const std::string& text, ClientOptions options = {}) {
  return parse_config(core::Uri::parse(text), options);
}

Errc code_of(const std::string& text) {
  try {
    parse(text);
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << text << " was accepted";
  return Errc::internal;
}

TEST(MysqlConfig, ParsesUserPasswordHostPortDatabaseAndPool) {
  ClientOptions options;
  options.op_timeout = std::chrono::milliseconds(1234);
  const MysqlConfig c = parse("mysql://app:s%40cret@db.example:3307/locks?pool=8", options);
  EXPECT_EQ(c.user, "app");
  EXPECT_EQ(c.password, "s@cret");
  EXPECT_EQ(c.host, "db.example");
  EXPECT_EQ(c.port, 3307);
  EXPECT_EQ(c.database, "locks");
  EXPECT_EQ(c.pool, 8u);
  EXPECT_EQ(c.op_timeout.count(), 1234);
  EXPECT_EQ(c.lock_prefix(), "warden:locks:");
}

TEST(MysqlConfig, DefaultsToPort3306AnEmptyPasswordAndAPoolOf64) {
  const MysqlConfig c = parse("mysql://app@127.0.0.1/warden");
  EXPECT_EQ(c.port, kDefaultPort);
  EXPECT_EQ(c.password, "");
  EXPECT_EQ(c.pool, kDefaultPool);
}

TEST(MysqlConfig, BadUrisAreInvalidArguments) {
  for (const std::string& bad : std::vector<std::string>{
           "mysql://127.0.0.1/warden",                          // no user
           "mysql://app:pw@127.0.0.1",                          // no database
           "mysql://app:pw@127.0.0.1:0/warden",                 // port 0
           "mysql://app:pw@h1,h2/warden",                       // two hosts
           "mysql://app:pw@127.0.0.1/warden?pool=1",            // pool too small
           "mysql://app:pw@127.0.0.1/warden?pool=x",            // pool not a number
           "mysql://app:pw@127.0.0.1/warden?pool=5000",         // pool too large
           "mysql://app:pw@127.0.0.1/warden?schema=x",          // unknown parameter
           "mysql://app:pw@127.0.0.1/war%27den",                // a quote in the database
           "mysql://app:pw@127.0.0.1/a/b",                      // a path, not a database
           "mysql://app:pw@127.0.0.1/" + std::string(37, 'd'),  // too long for lock names
       }) {
    EXPECT_EQ(code_of(bad), Errc::invalid_argument) << bad;
  }
}

TEST(MysqlConfig, TheLongestDatabaseKeepsLockNamesWithinSixtyFourCharacters) {
  const MysqlConfig c = parse("mysql://app@127.0.0.1/" + std::string(kMaxDatabase, 'd'));
  EXPECT_LE(c.lock_prefix().size() + std::to_string(UINT64_MAX).size(), 64u);
}

}  // namespace
}  // namespace warden::engines::mysql

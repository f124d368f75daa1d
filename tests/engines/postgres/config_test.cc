// postgres:// URIs: what parse_config accepts, what it hands to libpq, and every bad
// URI refused with invalid_argument before anything is connected.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/uri.h"
#include "engines/postgres/pg_config.h"
#include "warden/client.h"
#include "warden/error.h"

namespace warden::engines::postgres {
namespace {

PgConfig parse(const std::string& text) {
  return parse_config(core::Uri::parse(text), ClientOptions{});
}

std::string conninfo_value(const PgConfig& config, const std::string& key) {
  const auto pairs = config.conninfo();
  const auto it =
      std::find_if(pairs.begin(), pairs.end(), [&](const auto& p) { return p.first == key; });
  return it == pairs.end() ? "<absent>" : it->second;
}

TEST(PostgresConfig, ReadsEveryPart) {
  const PgConfig config = parse(
      "postgres://alice:s%40cret@db.example:6543/orders?schema=locks_1&pool=3&wait_sessions=5");
  EXPECT_EQ(config.host, "db.example");
  EXPECT_EQ(config.port, 6543);
  EXPECT_EQ(config.user, "alice");
  EXPECT_EQ(config.password, "s@cret");
  EXPECT_EQ(config.database, "orders");
  EXPECT_EQ(config.schema, "locks_1");
  EXPECT_EQ(config.pool, 3u);
  EXPECT_EQ(config.wait_sessions, 5u);
  EXPECT_EQ(conninfo_value(config, "dbname"), "orders");
  EXPECT_EQ(conninfo_value(config, "sslmode"), "disable");
  EXPECT_EQ(config.describe().find("s@cret"), std::string::npos) << "the password is never shown";
}

TEST(PostgresConfig, Defaults) {
  const PgConfig config = parse("postgresql://127.0.0.1");
  EXPECT_EQ(config.port, kDefaultPort);
  EXPECT_EQ(config.schema, "warden");
  EXPECT_EQ(config.pool, kDefaultPool);
  EXPECT_EQ(config.wait_sessions, kDefaultWaitSessions);
  EXPECT_FALSE(config.user);
  EXPECT_FALSE(config.database);
  EXPECT_EQ(conninfo_value(config, "user"), "<absent>");
}

TEST(PostgresConfig, TlsBecomesLibpqSslModes) {
  const PgConfig strict = parse("postgres://h/db?tls=1&ca=/ca.pem&cert=/c.pem&key=/k.pem");
  EXPECT_EQ(conninfo_value(strict, "sslmode"), "verify-full");
  EXPECT_EQ(conninfo_value(strict, "sslrootcert"), "/ca.pem");
  EXPECT_EQ(conninfo_value(strict, "sslcert"), "/c.pem");
  EXPECT_EQ(conninfo_value(strict, "sslkey"), "/k.pem");
  EXPECT_EQ(conninfo_value(parse("postgres://h/db?tls=1&insecure=1"), "sslmode"), "require");
}

TEST(PostgresConfig, BadUrisAreRefusedBeforeConnecting) {
  for (const std::string& bad : std::vector<std::string>{
           "postgres://",                                             // no host
           "postgres://h1,h2/db",                                     // one server only
           "postgres://127.0.0.1:0/db",                               // port 0
           "postgres://127.0.0.1:70000/db",                           // port out of range
           "postgres://:pw@127.0.0.1/db",                             // a password without a user
           "postgres://127.0.0.1/a/b",                                // '/' in the database
           "postgres://127.0.0.1/db?schema=",                         // empty schema
           "postgres://127.0.0.1/db?schema=1abc",                     // not an identifier
           "postgres://127.0.0.1/db?schema=a%22b",                    // a quote
           "postgres://127.0.0.1/db?schema=" + std::string(64, 'a'),  // too long
           "postgres://127.0.0.1/db?pool=-1",                         // pool out of range
           "postgres://127.0.0.1/db?pool=1001",                       //
           "postgres://127.0.0.1/db?pool=x",                          //
           "postgres://127.0.0.1/db?wait_sessions=0",                 // wait_sessions out of range
           "postgres://127.0.0.1/db?wait_sessions=10001",             //
           "postgres://127.0.0.1/db?ttl=5",                           // unknown parameter
           "postgres://127.0.0.1/db?ca=/x.pem",                       // ca without tls=1
       }) {
    try {
      // Port 1 would refuse a connection (unavailable): invalid_argument proves none
      // was tried.
      (void)Client::open(bad);
      ADD_FAILURE() << "opened " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << bad << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace warden::engines::postgres

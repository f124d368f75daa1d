#include "core/uri.h"

#include <gtest/gtest.h>

#include "warden/error.h"

namespace warden::core {
namespace {

Errc code_of(std::string_view text) {
  try {
    Uri::parse(text);
  } catch (const Error& e) {
    return e.code();
  }
  return Errc::internal;  // parsed: the caller expected an error
}

TEST(Uri, ParsesSchemeHostsPortsPathAndQuery) {
  const Uri uri = Uri::parse("ETCD://a.example:2379,b:2380,[::1]:2381/chroot/x?timeout=5s&tls");
  EXPECT_EQ(uri.scheme, "etcd");
  ASSERT_EQ(uri.hosts.size(), 3u);
  EXPECT_EQ(uri.hosts[0], (HostPort{"a.example", 2379}));
  EXPECT_EQ(uri.hosts[1], (HostPort{"b", 2380}));
  EXPECT_EQ(uri.hosts[2], (HostPort{"::1", 2381}));
  EXPECT_EQ(uri.path, "chroot/x");
  EXPECT_EQ(uri.query.at("timeout"), "5s");
  EXPECT_EQ(uri.query.at("tls"), "");
}

TEST(Uri, ParsesUserAndPercentEncodedPassword) {
  const Uri uri = Uri::parse("redis://app:p%40ss%3Aword@127.0.0.1:6379/2");
  EXPECT_EQ(uri.user, "app");
  EXPECT_EQ(uri.password, "p@ss:word");
  EXPECT_EQ(uri.path, "2");
  EXPECT_EQ(uri.hosts[0].port, 6379);
}

TEST(Uri, HostWithoutPortAndEmptyAuthorityAreValid) {
  EXPECT_FALSE(Uri::parse("zk://zoo").hosts[0].port.has_value());
  EXPECT_TRUE(Uri::parse("mem://").hosts.empty());
  EXPECT_EQ(Uri::parse("mem://tests").hosts[0].host, "tests");
}

TEST(Uri, RedactedHidesThePassword) {
  const Uri uri = Uri::parse("redis://u:secret@h:1/0");
  EXPECT_EQ(uri.redacted(), "redis://u:***@h:1/0");
  EXPECT_EQ(uri.redacted().find("secret"), std::string::npos);
}

TEST(Uri, RejectsMalformedText) {
  for (const char* text :
       {"", "redis", "://h", "redis:/h", "1redis://h", "redis://h:", "redis://h:0",
        "redis://h:65536", "redis://h:12x", "redis://h,", "redis://,h", "redis://h%zz/x",
        "redis://[::1", "redis://bad host", "redis://h/%4"}) {
    EXPECT_EQ(code_of(text), Errc::invalid_argument) << text;
  }
}

TEST(Uri, ErrorsDoNotEchoThePassword) {
  try {
    Uri::parse("redis://u:topsecret@h:99999");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("topsecret"), std::string::npos) << e.what();
  }
}

// Found by fuzz/uri_fuzz.cc: a password holding an unescaped '/' or '?' split into the
// port and the path or query, and their errors quoted the pieces ("port 'pa' is not a
// number", "database='ss@h' is not a number", "unknown parameter 'ss'").
TEST(Uri, PasswordWithUnescapedSlashOrQuestionMarkIsRefusedUnquoted) {
  for (const char* text : {"redis://u:pa/ss@h", "redis://u:123/ss@h", "redis://u:12?ss=1@h",
                           "etcd://u:x@h/p@q", "zk://h?k=a@b"}) {
    try {
      Uri::parse(text);
      ADD_FAILURE() << "expected an error for " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << text;
      const std::string message = e.what();
      EXPECT_NE(message.find("must be %-escaped"), std::string::npos) << message;
      for (const char* piece : {"pa", "ss", "123", "@h", "p@q", "a@b"}) {
        EXPECT_EQ(message.find(std::string("'") + piece), std::string::npos) << message;
      }
    }
  }
  // Escaped, the same password parses.
  EXPECT_EQ(Uri::parse("redis://u:123%2Fss@h").password, "123/ss");
  EXPECT_EQ(Uri::parse("zk://h/pre%40fix").path, "pre@fix");
}

}  // namespace
}  // namespace warden::core

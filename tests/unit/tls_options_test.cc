// The TLS part of engine URIs, read once for every engine (core/tls_options.h).
#include "core/tls_options.h"

#include <gtest/gtest.h>

#include "warden/error.h"

namespace warden::core {
namespace {

TlsOptions tls_of(std::string_view text) {
  Uri uri = Uri::parse(text);
  resolve_tls_scheme(uri);
  return parse_tls_options(uri, uri.scheme);
}

Errc error_of(std::string_view text) {
  try {
    tls_of(text);
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << text << " was accepted";
  return Errc::internal;
}

TEST(TlsOptions, PlainByDefault) {
  const TlsOptions tls = tls_of("redis://127.0.0.1:6379");
  EXPECT_FALSE(tls.enabled);
  EXPECT_FALSE(tls.insecure);
  EXPECT_FALSE(tls.ca_file);
}

TEST(TlsOptions, TheSecureSchemesAreTheirEngineWithTls) {
  for (const auto& [alias, engine] :
       {std::pair{"wardens", "warden"}, std::pair{"rediss", "redis"}, std::pair{"etcds", "etcd"}}) {
    Uri uri = Uri::parse(std::string(alias) + "://h:1?ca=/x/ca.pem");
    resolve_tls_scheme(uri);
    EXPECT_EQ(uri.scheme, engine);
    const TlsOptions tls = parse_tls_options(uri, uri.scheme);
    EXPECT_TRUE(tls.enabled) << alias;
    EXPECT_EQ(tls.ca_file, "/x/ca.pem");
  }
}

TEST(TlsOptions, ReadsEveryFileAndTheInsecureSwitch) {
  const TlsOptions tls =
      tls_of("redlock://a:1,b:2?tls=1&ca=ca.pem&cert=c.pem&key=k%20x.pem&insecure=1");
  EXPECT_TRUE(tls.enabled);
  EXPECT_EQ(tls.ca_file, "ca.pem");
  EXPECT_EQ(tls.cert_file, "c.pem");
  EXPECT_EQ(tls.key_file, "k x.pem");
  EXPECT_TRUE(tls.insecure);
  EXPECT_TRUE(is_tls_parameter("ca"));
  EXPECT_FALSE(is_tls_parameter("pool"));
}

TEST(TlsOptions, BadCombinationsAreRefusedByName) {
  EXPECT_EQ(error_of("redis://h?ca=ca.pem"), Errc::invalid_argument);    // no tls
  EXPECT_EQ(error_of("redis://h?insecure=1"), Errc::invalid_argument);   // no tls
  EXPECT_EQ(error_of("rediss://h?cert=c.pem"), Errc::invalid_argument);  // no key
  EXPECT_EQ(error_of("rediss://h?key=k.pem"), Errc::invalid_argument);   // no cert
  EXPECT_EQ(error_of("redis://h?tls=yes"), Errc::invalid_argument);      // not a flag
  EXPECT_EQ(error_of("rediss://h?tls=0"), Errc::invalid_argument);       // contradicts
  EXPECT_EQ(error_of("rediss://h?ca="), Errc::invalid_argument);         // no file
  try {
    tls_of("redis://h?ca=ca.pem");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rediss://"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace warden::core

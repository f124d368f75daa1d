// fuzz/uri_fuzz.cc — fuzz target for engine URIs: core::Uri::parse (core/uri.h) and the
// engines' config parsers, which are pure (they validate and copy; nothing connects).
//
// The input is the URI text. What must hold for any bytes:
//   - parse returns a Uri or throws Error(invalid_argument); nothing else escapes;
//   - a parsed Uri has a non-empty lower-case scheme, and writing it back out with every
//     field %-escaped parses to the same Uri (nothing parse produces is unreachable);
//   - redacted() does not depend on the password and never shows it;
//   - every engine's parse_config either returns a config within its documented bounds
//     or throws Error(invalid_argument), whose message never shows the password;
//   - the input used as an unescaped password never shows in an error or redacted().
//
// A failed check prints what failed and aborts, which libFuzzer reports as a crash.
// See CMakeLists.txt here for running it.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "core/uri.h"
#include "engines/etcd/etcd_config.h"
#include "engines/redis/redis_config.h"
#include "engines/redlock/redlock_config.h"
#include "engines/warden/warden_config.h"
#include "engines/zookeeper/zk_config.h"
#include "fuzz_check.h"
#include "warden/error.h"
#include "warden/options.h"

namespace warden::core {
namespace {

// A password no input can produce by accident: it stands in for the real one when
// checking that no text shows the password.
const std::string kSecret = "\x01s3cr3t\x02";

// Whether the stand-in password appears in `uri` other than as its password (the
// fuzzer can put it anywhere); then the checks that rely on it are skipped.
bool holds_secret(const Uri& uri) {
  const auto in = [](const std::string& text) { return text.find(kSecret) != std::string::npos; };
  if (in(uri.scheme) || in(uri.user.value_or("")) || in(uri.path)) return true;
  for (const HostPort& hp : uri.hosts) {
    if (in(hp.host)) return true;
  }
  for (const auto& [key, value] : uri.query) {
    if (in(key) || in(value)) return true;
  }
  return false;
}

bool same(const Uri& a, const Uri& b) {
  return a.scheme == b.scheme && a.user == b.user && a.password == b.password &&
         a.hosts == b.hosts && a.path == b.path && a.query == b.query;
}

std::string escaped(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) != 0 || c == '-' || c == '.' || c == '_') {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    }
  }
  return out;
}

bool plain_host(std::string_view host) {
  for (const char c : host) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '.' && c != '-' && c != '_') {
      return false;
    }
  }
  return !host.empty();
}

// `uri` as text that must parse back to it: escapes where parse decodes, brackets
// around a host that is not a plain name (parse does not decode hosts).
std::string written(const Uri& uri) {
  std::string out = uri.scheme + "://";
  if (uri.user) {
    out += escaped(*uri.user);
    if (uri.password) out += ':' + escaped(*uri.password);
    out += '@';
  }
  for (std::size_t i = 0; i < uri.hosts.size(); ++i) {
    if (i > 0) out += ',';
    const HostPort& hp = uri.hosts[i];
    out += plain_host(hp.host) ? hp.host : '[' + hp.host + ']';
    if (hp.port) out += ':' + std::to_string(*hp.port);
  }
  if (!uri.path.empty()) out += '/' + escaped(uri.path);
  char sep = '?';
  for (const auto& [key, value] : uri.query) {
    out += sep + escaped(key) + '=' + escaped(value);
    sep = '&';
  }
  return out;
}

// Runs one engine's parse_config on `uri`, and on `uri` with kSecret as its password;
// `check` judges a config that was accepted.
template <typename Config>
void check_config(const Uri& uri, Config (*parse)(const Uri&, const ClientOptions&),
                  const std::function<void(const Config&)>& check) {
  const ClientOptions options;
  const bool secret_free = !holds_secret(uri);
  for (const bool secret : {false, true}) {
    if (secret && !secret_free) break;
    Uri input = uri;
    if (secret) {
      if (!input.user) input.user = "";
      input.password = kSecret;
    }
    try {
      check(parse(input, options));
    } catch (const Error& e) {
      WARDEN_FUZZ_CHECK(e.code() == Errc::invalid_argument);
      WARDEN_FUZZ_CHECK(!secret ||
                        std::string_view(e.what()).find(kSecret) == std::string_view::npos);
    }
  }
}

void check_configs(const Uri& uri) {
  using namespace warden::engines;
  check_config<redis::RedisConfig>(uri, redis::parse_config, [&](const auto& c) {
    if (c.sentinel) {
      WARDEN_FUZZ_CHECK(uri.scheme == "redis+sentinel");
      WARDEN_FUZZ_CHECK(c.sentinel->sentinels.size() == uri.hosts.size());
      WARDEN_FUZZ_CHECK(!c.sentinel->master_name.empty() && c.sentinel->master_name.size() <= 128);
      WARDEN_FUZZ_CHECK(c.sentinel->master_name.find_first_of(" /?\r\n") == std::string::npos);
      WARDEN_FUZZ_CHECK(!c.sentinel->user || c.sentinel->password);
    } else if (!c.cluster_seeds.empty()) {
      WARDEN_FUZZ_CHECK(uri.scheme == "redis+cluster");
      WARDEN_FUZZ_CHECK(c.cluster_seeds.size() == uri.hosts.size());
      WARDEN_FUZZ_CHECK(!c.connect.db && c.min_replicas == 0);
    } else {
      WARDEN_FUZZ_CHECK(uri.scheme == "redis" && uri.hosts.size() == 1);
    }
    WARDEN_FUZZ_CHECK(c.min_replicas >= 0 && c.min_replicas <= 16);
    WARDEN_FUZZ_CHECK(c.pool_size >= 1 && c.pool_size <= redis::kMaxPoolSize);
    WARDEN_FUZZ_CHECK(c.waiter_ttl >= redis::kMinWaiterTtl && c.waiter_ttl <= redis::kMaxWaiterTtl);
    WARDEN_FUZZ_CHECK(c.poll.max.count() >= 1 && c.poll.max <= c.waiter_ttl / 3);
    WARDEN_FUZZ_CHECK(c.poll.initial <= c.poll.max);
    WARDEN_FUZZ_CHECK(c.sentinel || (c.connect.port != 0 && !c.connect.host.empty()));
    WARDEN_FUZZ_CHECK(!c.connect.password || !c.connect.password->empty());
  });
  check_config<redlock::RedlockConfig>(uri, redlock::parse_config, [&](const auto& c) {
    WARDEN_FUZZ_CHECK(uri.scheme == "redlock");
    WARDEN_FUZZ_CHECK(!c.masters.empty() && c.masters.size() <= redlock::kMaxMasters);
    WARDEN_FUZZ_CHECK(c.quorum() > c.masters.size() / 2 && c.quorum() <= c.masters.size());
    std::set<std::pair<std::string, std::uint16_t>> seen;
    for (const auto& m : c.masters) {
      WARDEN_FUZZ_CHECK(m.port != 0 && !m.host.empty());
      WARDEN_FUZZ_CHECK(seen.emplace(m.host, m.port).second);  // no master votes twice
      WARDEN_FUZZ_CHECK(m.timeout == c.node_timeout);
    }
    WARDEN_FUZZ_CHECK(c.pool_size >= 1 && c.pool_size <= 64);
    WARDEN_FUZZ_CHECK(c.retry_count >= 0 && c.retry_count <= 1000);
  });
  check_config<etcd::EtcdConfig>(uri, etcd::parse_config, [&](const auto& c) {
    WARDEN_FUZZ_CHECK(uri.scheme == "etcd");
    WARDEN_FUZZ_CHECK(c.endpoints.size() == uri.hosts.size() && !c.endpoints.empty());
    WARDEN_FUZZ_CHECK(!c.prefix.empty() && c.prefix.front() != '/' && c.prefix.back() != '/');
    WARDEN_FUZZ_CHECK(c.prefix.find("//") == std::string::npos);
    WARDEN_FUZZ_CHECK(c.user.has_value() == c.password.has_value());
  });
  check_config<zookeeper::ZkConfig>(uri, zookeeper::parse_config, [&](const auto& c) {
    WARDEN_FUZZ_CHECK(uri.scheme == "zk");
    WARDEN_FUZZ_CHECK(!c.hosts.empty());
    WARDEN_FUZZ_CHECK(c.prefix.size() >= 2 && c.prefix.front() == '/' && c.prefix.back() != '/');
    WARDEN_FUZZ_CHECK(c.prefix.find("//") == std::string::npos);
    for (const char ch : c.prefix) WARDEN_FUZZ_CHECK(ch > 0x20 && ch < 0x7f);
    WARDEN_FUZZ_CHECK(c.session_timeout.count() >= 1'000 && c.session_timeout.count() <= 600'000);
  });
  check_config<wardend::WardenConfig>(uri, wardend::parse_config, [&](const auto& c) {
    WARDEN_FUZZ_CHECK(uri.scheme == "warden" && uri.hosts.size() == 1);
    WARDEN_FUZZ_CHECK(c.pool_size >= 1 && c.pool_size <= wardend::kMaxPoolSize);
    WARDEN_FUZZ_CHECK(c.connect.port != 0);
    // A user (wardend --users) is sent only with its password, and never empty.
    WARDEN_FUZZ_CHECK(!c.connect.user || (!c.connect.user->empty() && c.connect.password));
  });
}

void check_parsed(const Uri& uri) {
  WARDEN_FUZZ_CHECK(!uri.scheme.empty());
  for (const char c : uri.scheme) {
    WARDEN_FUZZ_CHECK(std::isupper(static_cast<unsigned char>(c)) == 0);
  }
  for (const HostPort& hp : uri.hosts) {
    WARDEN_FUZZ_CHECK(!hp.host.empty() && (!hp.port || *hp.port != 0));
  }

  const std::string text = written(uri);
  try {
    WARDEN_FUZZ_CHECK(same(Uri::parse(text), uri));
  } catch (const Error&) {
    WARDEN_FUZZ_CHECK(!"a parsed URI, written back out, does not parse");
  }

  Uri secret = uri;
  if (!secret.user) secret.user = "";
  secret.password = kSecret;
  WARDEN_FUZZ_CHECK(holds_secret(uri) || secret.redacted().find(kSecret) == std::string::npos);
  if (uri.user) {
    Uri other = uri;
    other.password = kSecret;
    WARDEN_FUZZ_CHECK(other.redacted() == uri.redacted() || !uri.password);
  }

  check_configs(uri);
}

// The input as a password, unescaped, marked by \x01 at one end: no error of Uri::parse
// or of a config parser, and no redacted(), may show the marker, hence any part of the
// password next to it. (A password holding '/' or '?' used to split into the path or
// the query, and error messages quoted those.)
void check_password_never_shown(std::string_view input) {
  if (input.find('\x01') != std::string_view::npos) return;
  static constexpr std::string_view kSchemes[] = {
      "redis", "redis+sentinel", "redis+cluster", "redlock", "etcd", "zk", "warden"};
  const std::string password(input);
  for (const std::string_view scheme : kSchemes) {
    for (const std::string& text : {std::string(scheme) + "://u:\x01" + password + "@h:1",
                                    std::string(scheme) + "://u:" + password + "\x01@h:1"}) {
      Uri uri;
      try {
        uri = Uri::parse(text);
      } catch (const Error& e) {
        WARDEN_FUZZ_CHECK(std::string_view(e.what()).find('\x01') == std::string_view::npos);
        continue;
      }
      WARDEN_FUZZ_CHECK(uri.redacted().find('\x01') == std::string::npos);
      const auto never_shown = [&](const auto& parse) {
        try {
          parse(uri, ClientOptions{});
        } catch (const Error& e) {
          WARDEN_FUZZ_CHECK(std::string_view(e.what()).find('\x01') == std::string_view::npos);
        }
      };
      never_shown(engines::redis::parse_config);
      never_shown(engines::redlock::parse_config);
      never_shown(engines::etcd::parse_config);
      never_shown(engines::zookeeper::parse_config);
      never_shown(engines::wardend::parse_config);
    }
  }
}

}  // namespace
}  // namespace warden::core

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace warden::core;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_password_never_shown(text);
  Uri uri;
  try {
    uri = Uri::parse(text);
  } catch (const warden::Error& e) {
    WARDEN_FUZZ_CHECK(e.code() == warden::Errc::invalid_argument);
    return 0;
  }
  check_parsed(uri);
  return 0;
}

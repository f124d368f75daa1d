#include "core/uri.h"

#include <cctype>
#include <charconv>

#include "warden/error.h"

namespace warden::core {
namespace {

// The URI may hold a password, so errors name the problem, never the whole text.
[[noreturn]] void malformed(const std::string& why) {
  throw Error(Errc::invalid_argument, "malformed URI: " + why);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size()) malformed("truncated %-escape");
    const int hi = hex_value(text[i + 1]);
    const int lo = hex_value(text[i + 2]);
    if (hi < 0 || lo < 0) malformed("bad %-escape");
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

bool host_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
}

HostPort parse_host(std::string_view text) {
  HostPort hp;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {  // [v6]:port
    const auto close = text.find(']');
    if (close == std::string_view::npos) malformed("unclosed '[' in host");
    hp.host = std::string(text.substr(1, close - 1));
    if (hp.host.empty()) malformed("empty IPv6 host");
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') malformed("junk after ']' in host");
      port = rest.substr(1);
      if (port.empty()) malformed("empty port");
    }
  } else {
    const auto colon = text.find(':');
    hp.host = std::string(text.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = text.substr(colon + 1);
      if (port.empty()) malformed("empty port");
    }
    if (hp.host.empty()) malformed("empty host");
    for (char c : hp.host) {
      if (!host_char(c)) malformed("host '" + hp.host + "' holds an invalid character");
    }
  }
  if (!port.empty()) {
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
      malformed("port '" + std::string(port) + "' is not a number in 1..65535");
    }
    hp.port = static_cast<std::uint16_t>(value);
  }
  return hp;
}

}  // namespace

Uri Uri::parse(std::string_view text) {
  Uri uri;
  const auto sep = text.find("://");
  if (sep == std::string_view::npos || sep == 0) malformed("expected scheme://...");
  for (std::size_t i = 0; i < sep; ++i) {
    const char c = text[i];
    const bool ok = std::isalpha(static_cast<unsigned char>(c)) ||
                    (i > 0 && (std::isdigit(static_cast<unsigned char>(c)) || c == '+' ||
                               c == '.' || c == '-'));
    if (!ok) malformed("invalid scheme");
    uri.scheme += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  std::string_view rest = text.substr(sep + 3);

  // The user info ends at the last '@' before the first '/' or '?'. An '@' after them
  // means a user or password held an unescaped '/' or '?', and its pieces would land in
  // the host, path or query, whose errors quote them: refuse it without quoting.
  if (const auto end = rest.find_first_of("/?");
      end != std::string_view::npos && rest.find('@', end) != std::string_view::npos) {
    malformed("'@' after the host; a user or password holding '/', '?' or '@' must be %-escaped");
  }
  // Query.
  if (const auto q = rest.find('?'); q != std::string_view::npos) {
    std::string_view query = rest.substr(q + 1);
    rest = rest.substr(0, q);
    while (!query.empty()) {
      const auto amp = query.find('&');
      const std::string_view pair = query.substr(0, amp);
      query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
      if (pair.empty()) continue;
      const auto eq = pair.find('=');
      const std::string key = percent_decode(pair.substr(0, eq));
      if (key.empty()) malformed("empty query parameter name");
      uri.query[key] =
          eq == std::string_view::npos ? std::string{} : percent_decode(pair.substr(eq + 1));
    }
  }
  // Path.
  if (const auto slash = rest.find('/'); slash != std::string_view::npos) {
    uri.path = percent_decode(rest.substr(slash + 1));
    rest = rest.substr(0, slash);
  }
  // User info: up to the last '@' (a password may hold '@' only escaped, but be lenient).
  if (const auto at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view info = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const auto colon = info.find(':');
    uri.user = percent_decode(info.substr(0, colon));
    if (colon != std::string_view::npos) {
      uri.password = percent_decode(info.substr(colon + 1));
    }
  }
  // Hosts.
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    uri.hosts.push_back(parse_host(rest.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
    if (rest.empty()) malformed("trailing ',' in host list");
  }
  return uri;
}

std::string Uri::redacted() const {
  std::string out = scheme + "://";
  if (user) {
    out += *user;
    if (password) out += ":***";
    out += '@';
  }
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    if (i > 0) out += ',';
    const bool v6 = hosts[i].host.find(':') != std::string::npos;
    out += v6 ? "[" + hosts[i].host + "]" : hosts[i].host;
    if (hosts[i].port) out += ':' + std::to_string(*hosts[i].port);
  }
  if (!path.empty()) out += '/' + path;
  return out;
}

std::optional<std::int64_t> parse_int_in_range(std::string_view text, std::int64_t low,
                                               std::int64_t high) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < low ||
      value > high) {
    return std::nullopt;
  }
  return value;
}

}  // namespace warden::core

#include "core/tls_options.h"

#include <array>
#include <utility>

#include "warden/error.h"

namespace warden::core {
namespace {

constexpr std::array<std::pair<std::string_view, std::string_view>, 3> kTlsSchemes = {{
    {"wardens", "warden"},
    {"rediss", "redis"},
    {"etcds", "etcd"},
}};

[[noreturn]] void invalid(std::string_view engine, const std::string& why) {
  throw Error(Errc::invalid_argument, std::string(engine) + ":// URI: " + why);
}

bool parse_flag(std::string_view engine, const std::string& key, const std::string& value) {
  if (value == "1" || value == "true") return true;
  if (value == "0" || value == "false") return false;
  invalid(engine, key + "='" + value + "' must be 1 or 0");
}

}  // namespace

bool is_tls_parameter(std::string_view key) {
  return key == "tls" || key == "ca" || key == "cert" || key == "key" || key == "insecure";
}

TlsOptions parse_tls_options(const Uri& uri, std::string_view engine) {
  TlsOptions tls;
  const auto get = [&uri](const char* key) -> const std::string* {
    const auto it = uri.query.find(key);
    return it == uri.query.end() ? nullptr : &it->second;
  };
  if (const auto* value = get("tls")) tls.enabled = parse_flag(engine, "tls", *value);
  if (const auto* value = get("insecure")) tls.insecure = parse_flag(engine, "insecure", *value);
  for (const char* key : {"ca", "cert", "key"}) {
    const auto* value = get(key);
    if (value == nullptr) continue;
    if (value->empty()) invalid(engine, std::string(key) + "= needs a file name");
    std::optional<std::string>& slot = key == std::string_view("ca")     ? tls.ca_file
                                       : key == std::string_view("cert") ? tls.cert_file
                                                                         : tls.key_file;
    slot = *value;
  }
  if (!tls.enabled && (tls.ca_file || tls.cert_file || tls.key_file || tls.insecure)) {
    invalid(engine, "ca, cert, key and insecure need tls=1 (or the " + std::string(engine) +
                        "s:// scheme)");
  }
  if (tls.cert_file.has_value() != tls.key_file.has_value()) {
    invalid(engine, "a client certificate needs both cert= and key=");
  }
  return tls;
}

void resolve_tls_scheme(Uri& uri) {
  for (const auto& [alias, engine] : kTlsSchemes) {
    if (uri.scheme != alias) continue;
    const auto it = uri.query.find("tls");
    if (it != uri.query.end() && (it->second == "0" || it->second == "false")) {
      throw Error(Errc::invalid_argument, std::string(alias) + ":// URI: tls=" + it->second +
                                              " contradicts the scheme, which means TLS");
    }
    uri.scheme = std::string(engine);
    uri.query["tls"] = "1";
    return;
  }
}

}  // namespace warden::core

#include "engines/resp_client/errors.h"

#include <array>
#include <utility>

namespace warden::engines::resp_client {
namespace {

Errc errc_for_code(std::string_view code) {
  static constexpr std::array<std::pair<std::string_view, Errc>, 14> kCodes = {{
      {"NOAUTH", Errc::permission_denied},
      {"WRONGPASS", Errc::permission_denied},
      {"NOPERM", Errc::permission_denied},
      {"INVALID", Errc::invalid_argument},
      {"LIMIT", Errc::resource_exhausted},
      {"OOM", Errc::resource_exhausted},
      {"STARTING", Errc::unavailable},
      {"LOADING", Errc::unavailable},
      {"BUSY", Errc::unavailable},
      {"TRYAGAIN", Errc::unavailable},
      {"MASTERDOWN", Errc::unavailable},
      {"CLUSTERDOWN", Errc::unavailable},
      {"READONLY", Errc::unavailable},
      {"MOVED", Errc::unavailable},  // a wardend cell member that does not lead
  }};
  for (const auto& [word, errc] : kCodes) {
    if (code == word) return errc;
  }
  return Errc::internal;
}

}  // namespace

Error transport_error(Failure failure, std::string_view endpoint, std::string_view detail) {
  const std::string where(endpoint);
  const std::string why(detail);
  switch (failure) {
    case Failure::connect:
      return Error(Errc::unavailable, "cannot connect to " + where + ": " + why);
    case Failure::io:
      return Error(Errc::unavailable, "connection to " + where + " lost: " + why);
    case Failure::timeout:
      return Error(Errc::deadline_exceeded, where + " did not answer in time: " + why);
    case Failure::protocol:
      return Error(Errc::internal, where + " sent something that is not RESP: " + why);
  }
  return Error(Errc::internal, where + ": " + why);
}

Error reply_error(const Reply& reply, std::string_view context) {
  return Error(errc_for_code(reply.error_code()), std::string(context) + " failed: " + reply.text);
}

Error auth_error(const Reply& reply, std::string_view endpoint) {
  return Error(Errc::permission_denied,
               std::string(endpoint) + " refused our password: " + reply.describe());
}

Error unexpected_reply(const Reply& reply, std::string_view context) {
  return Error(Errc::internal,
               "unexpected reply to " + std::string(context) + ": " + reply.describe());
}

}  // namespace warden::engines::resp_client

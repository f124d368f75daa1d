#include "engines/etcd/request_value.h"

namespace warden::engines::etcd {
namespace {

constexpr std::string_view kExclusiveTag = "warden exclusive ";
constexpr std::string_view kSharedTag = "warden shared ";

}  // namespace

std::string request_value(Mode mode, std::string_view client, std::string_view value) {
  std::string out(mode == Mode::exclusive ? kExclusiveTag : kSharedTag);
  out += client;
  if (!value.empty()) {
    out += ' ';
    out += value;
  }
  return out;
}

std::string_view candidate_value(std::string_view stored) {
  if (stored.starts_with(kExclusiveTag)) {
    stored.remove_prefix(kExclusiveTag.size());
  } else if (stored.starts_with(kSharedTag)) {
    stored.remove_prefix(kSharedTag.size());
  } else {
    return {};
  }
  const auto end_of_client = stored.find(' ');
  if (end_of_client == std::string_view::npos) return {};  // no value
  return stored.substr(end_of_client + 1);
}

}  // namespace warden::engines::etcd

#include "engines/zookeeper/lock_nodes.h"

#include <charconv>

namespace warden::engines::zookeeper {
namespace {

constexpr std::size_t kSequenceDigits = 10;

std::string escape_name(const std::string& name) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(name.size());
  for (const char c : name) {
    const auto byte = static_cast<unsigned char>(c);
    const bool plain = (byte >= 'a' && byte <= 'z') || (byte >= 'A' && byte <= 'Z') ||
                       (byte >= '0' && byte <= '9') || byte == '_' || byte == '~' || byte == '-';
    if (plain) {
      out += c;
    } else {
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    }
  }
  return out;
}

}  // namespace

LockNodes LockNodes::of(const std::string& prefix, const std::string& group,
                        const std::string& name) {
  LockNodes nodes;
  nodes.prefix = prefix;
  nodes.group = prefix + '/' + group;
  nodes.lock = nodes.group + '/' + escape_name(name);
  return nodes;
}

std::string LockNodes::request(Mode mode, const std::string& guid, std::uint32_t permits,
                               std::uint32_t capacity) const {
  if (capacity > 0) {
    return lock + "/p-" + std::to_string(permits) + '.' + std::to_string(capacity) + '-' + guid +
           '-';
  }
  return lock + (mode == Mode::exclusive ? "/x-" : "/s-") + guid + '-';
}

std::optional<RequestNode> parse_request(const std::string& name) {
  if (name.size() < 2 + 1 + kSequenceDigits ||
      (name[0] != 'x' && name[0] != 's' && name[0] != 'p') || name[1] != '-' ||
      name[name.size() - kSequenceDigits - 1] != '-') {
    return std::nullopt;
  }
  RequestNode node;
  node.name = name;
  node.mode = name[0] == 'x' ? Mode::exclusive : Mode::shared;
  std::size_t guid_at = 2;
  if (name[0] == 'p') {
    // "p-K.N-": the permits asked for and the semaphore's number.
    const char* end = name.data() + name.size();
    const auto [dot, ec1] = std::from_chars(name.data() + 2, end, node.permits);
    if (ec1 != std::errc() || dot == end || *dot != '.') return std::nullopt;
    const auto [dash, ec2] = std::from_chars(dot + 1, end, node.capacity);
    if (ec2 != std::errc() || dash == end || *dash != '-' || node.permits == 0 ||
        node.permits > node.capacity) {
      return std::nullopt;
    }
    guid_at = static_cast<std::size_t>(dash + 1 - name.data());
    if (guid_at + 1 + kSequenceDigits > name.size()) return std::nullopt;
  }
  node.guid = name.substr(guid_at, name.size() - guid_at - kSequenceDigits - 1);
  const char* digits = name.data() + name.size() - kSequenceDigits;
  const auto [end, ec] = std::from_chars(digits, name.data() + name.size(), node.sequence);
  if (ec != std::errc() || end != name.data() + name.size()) return std::nullopt;
  return node;
}

std::string request_data(Mode mode, std::string_view client_id, std::string_view value) {
  std::string data = "warden " + std::string(to_string(mode)) + ' ' + std::string(client_id);
  if (!value.empty()) {
    data += '\n';
    data += value;
  }
  return data;
}

std::string value_in(std::string_view data) {
  const auto newline = data.find('\n');
  return newline == std::string_view::npos ? std::string() : std::string(data.substr(newline + 1));
}

}  // namespace warden::engines::zookeeper

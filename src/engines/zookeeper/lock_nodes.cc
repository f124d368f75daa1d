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

std::string LockNodes::request(Mode mode, const std::string& guid) const {
  return lock + (mode == Mode::exclusive ? "/x-" : "/s-") + guid + '-';
}

std::optional<RequestNode> parse_request(const std::string& name) {
  if (name.size() < 2 + 1 + kSequenceDigits || (name[0] != 'x' && name[0] != 's') ||
      name[1] != '-' || name[name.size() - kSequenceDigits - 1] != '-') {
    return std::nullopt;
  }
  RequestNode node;
  node.name = name;
  node.mode = name[0] == 'x' ? Mode::exclusive : Mode::shared;
  node.guid = name.substr(2, name.size() - 2 - kSequenceDigits - 1);
  const char* digits = name.data() + name.size() - kSequenceDigits;
  const auto [end, ec] = std::from_chars(digits, name.data() + name.size(), node.sequence);
  if (ec != std::errc() || end != name.data() + name.size()) return std::nullopt;
  return node;
}

}  // namespace warden::engines::zookeeper

#include "engines/zookeeper/lock_nodes.h"

#include <zookeeper/zookeeper.h>

#include <array>
#include <charconv>
#include <random>
#include <utility>
#include <vector>

#include "warden/error.h"

namespace warden::engines::zookeeper {
namespace {

constexpr std::size_t kSequenceDigits = 10;

// Layout::curator: what precedes the sequence digits in each kind of request node, and
// the mode it asks for. Curator sorts its InterProcessMutex's children by what follows
// the last "lock-", and kazoo matches "(__lock__|PATTERN…)-?\d{10}$": both are the
// server's sequence, one counter per parent, so the digits order every kind together.
struct Kind {
  std::string_view marker;
  Mode mode;
};
constexpr std::array<Kind, 5> kCuratorKinds = {{
    {"lock-", Mode::exclusive},     // Curator InterProcessMutex (and warden's exclusive)
    {"__WRIT__", Mode::exclusive},  // Curator InterProcessReadWriteLock, write side
    {"__lock__", Mode::exclusive},  // kazoo Lock and WriteLock
    {"__READ__", Mode::shared},     // Curator InterProcessReadWriteLock, read side
    {"__rlock__", Mode::shared},    // kazoo ReadLock
}};
constexpr std::string_view kProtection = "_c_";  // Curator's protected-name prefix

// A lock or group name that Layout::curator can use as a znode name as it is.
bool plain_node_name(const std::string& name) {
  if (name.empty() || name == "." || name == "..") return false;
  for (const char c : name) {
    if (c < 0x20 || c > 0x7e || c == '/') return false;
  }
  return true;
}

bool sequence_of(std::string_view digits, std::int64_t& out) {
  if (digits.size() != kSequenceDigits) return false;
  for (const char c : digits) {
    if (c < '0' || c > '9') return false;
  }
  return std::from_chars(digits.data(), digits.data() + digits.size(), out).ec == std::errc();
}

std::optional<RequestNode> parse_curator(const std::string& name) {
  if (name.size() <= kSequenceDigits) return std::nullopt;
  const std::string_view text(name);
  const std::string_view head = text.substr(0, text.size() - kSequenceDigits);
  RequestNode node;
  if (!sequence_of(text.substr(head.size()), node.sequence)) return std::nullopt;
  for (const Kind& kind : kCuratorKinds) {
    if (!head.ends_with(kind.marker)) continue;
    std::string_view stem = head.substr(0, head.size() - kind.marker.size());
    // Curator's "_c_UUID-" before the kind; kazoo's bare hex UUID.
    if (stem.starts_with(kProtection) && stem.ends_with('-')) {
      stem = stem.substr(kProtection.size(), stem.size() - kProtection.size() - 1);
    }
    node.name = name;
    node.mode = kind.mode;
    node.guid = std::string(stem);
    return node;
  }
  return std::nullopt;
}

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

std::string LockNodes::group_node(Layout layout, const std::string& prefix,
                                  const std::string& group) {
  const bool dots = group == "." || group == "..";
  if (layout == Layout::curator) {
    if (dots || (prefix.empty() && group == "zookeeper")) {
      throw Error(Errc::invalid_argument, "zk:// layout=curator: the group '" + group +
                                              "' cannot be a node name under '" +
                                              (prefix.empty() ? "/" : prefix) + "'");
    }
    return prefix + '/' + group;
  }
  // Every other group ([A-Za-z0-9._-]) is a node name as it is, and stays the path it
  // always was.
  return prefix + '/' + (dots ? escape_name(group) : group);
}

LockNodes LockNodes::of(Layout layout, const std::string& prefix, const std::string& group,
                        const std::string& name) {
  LockNodes nodes;
  nodes.layout = layout;
  nodes.prefix = prefix;
  nodes.group = group_node(layout, prefix, group);
  if (layout == Layout::curator) {
    // Curator and kazoo address a lock by its path: the name is the node's name as it
    // is, so one that cannot be a znode name unchanged is refused, never escaped.
    if (!plain_node_name(name)) {
      throw Error(Errc::invalid_argument,
                  "zk:// layout=curator: the lock name must be usable as a ZooKeeper node name "
                  "as it is (printable ASCII, no '/', not '.' or '..'), since Curator and kazoo "
                  "clients address the lock by its path; use the default layout for other "
                  "names");
    }
    nodes.lock = nodes.group + '/' + name;
  } else {
    nodes.lock = nodes.group + '/' + escape_name(name);
  }
  return nodes;
}

std::string LockNodes::request(Mode mode, const std::string& guid, std::uint32_t permits,
                               std::uint32_t capacity) const {
  if (layout == Layout::curator) {
    return lock + '/' + std::string(kProtection) + guid +
           (mode == Mode::exclusive ? "-lock-" : "-__READ__");
  }
  if (capacity > 0) {
    return lock + "/p-" + std::to_string(permits) + '.' + std::to_string(capacity) + '-' + guid +
           '-';
  }
  return lock + (mode == Mode::exclusive ? "/x-" : "/s-") + guid + '-';
}

std::string random_uuid() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::random_device device;
  std::array<unsigned char, 16> bytes{};
  for (std::size_t i = 0; i < bytes.size(); i += 4) {
    const std::uint32_t word = device();
    for (std::size_t j = 0; j < 4; ++j) bytes[i + j] = static_cast<unsigned char>(word >> (8 * j));
  }
  bytes[6] = static_cast<unsigned char>((bytes[6] & 0x0f) | 0x40);  // version 4
  bytes[8] = static_cast<unsigned char>((bytes[8] & 0x3f) | 0x80);  // RFC 4122 variant
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += kHex[bytes[i] >> 4];
    out += kHex[bytes[i] & 0xf];
  }
  return out;
}

std::optional<RequestNode> parse_request(const std::string& name, Layout layout) {
  if (layout == Layout::curator) return parse_curator(name);
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

std::vector<std::pair<std::string, int>> LockNodes::parents() const {
  std::vector<std::pair<std::string, int>> out;
  for (std::size_t slash = prefix.find('/', 1); !prefix.empty();
       slash = prefix.find('/', slash + 1)) {
    out.emplace_back(prefix.substr(0, slash), 0);
    if (slash == std::string::npos) break;
  }
  out.emplace_back(group, ZOO_CONTAINER);
  out.emplace_back(lock, ZOO_CONTAINER);
  return out;
}

std::optional<RequestNode> blocker_of(const std::vector<std::string>& children,
                                      const RequestNode& own, const LockNodes& nodes) {
  const std::string& lock = nodes.lock;
  std::optional<RequestNode> blocker;
  std::optional<RequestNode> earliest;
  std::uint64_t ahead = 0;
  for (const std::string& child : children) {
    const auto node = parse_request(child, nodes.layout);
    if (!node || node->sequence >= own.sequence) continue;
    if (node->capacity != own.capacity) {
      throw Error(Errc::invalid_argument,
                  "zk: " + lock + " is a semaphore of another number of permits, or not one");
    }
    ahead += node->permits;
    if (!earliest || node->sequence < earliest->sequence) earliest = node;
    if (own.mode == Mode::shared && node->mode != Mode::exclusive) continue;
    if (!blocker || node->sequence > blocker->sequence) blocker = node;
  }
  if (own.capacity > 0) {
    if (ahead + own.permits <= own.capacity) return std::nullopt;
    return earliest;
  }
  return blocker;
}

}  // namespace warden::engines::zookeeper

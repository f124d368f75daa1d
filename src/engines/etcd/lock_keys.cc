#include "engines/etcd/lock_keys.h"

#include <cstdio>

#include "warden/error.h"

namespace warden::engines::etcd {
namespace {

std::string escape_name(const std::string& name) {
  std::string out;
  out.reserve(name.size());
  for (const char c : name) {
    if (c == '%') {
      out += "%25";
    } else if (c == '/') {
      out += "%2F";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string group_scope(const std::string& prefix, const std::string& group) {
  return (prefix.empty() ? std::string() : prefix + '/') + group + '/';
}

LockKeys LockKeys::of(const std::string& prefix, const std::string& group, const std::string& name,
                      Layout layout) {
  LockKeys keys;
  keys.layout = layout;
  if (layout == Layout::concurrency) {
    // etcd's Mutex owns every key under "NAME/": the lock "a" would count the requests
    // of "a/b" as its own. Escaping would hide the name from `etcdctl lock`.
    if (name.find('/') != std::string::npos) {
      throw Error(Errc::invalid_argument,
                  "etcd:// layout=concurrency: the lock name '" + name +
                      "' holds a '/'; etcd's lock named " + group_scope(prefix, group) + name +
                      " would lie inside the lock " + group_scope(prefix, group) +
                      name.substr(0, name.find('/')) + " (use layout=warden, which escapes it)");
    }
    keys.lock = group_scope(prefix, group) + name + '/';
    return keys;
  }
  keys.lock = group_scope(prefix, group) + escape_name(name) + '/';
  return keys;
}

std::string LockKeys::request(Mode mode, const std::string& id) const {
  return lock + (mode == Mode::exclusive ? "w/" : "s/") + id;
}

std::string LockKeys::lease_request(std::int64_t lease) const { return lock + lease_hex(lease); }

std::string lease_hex(std::int64_t lease) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%llx",
                static_cast<unsigned long long>(static_cast<std::uint64_t>(lease)));
  return hex;
}

std::string prefix_end(std::string prefix) {
  // The smallest key greater than every key starting with `prefix`: drop trailing 0xff
  // bytes, then increment the last byte.
  while (!prefix.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(prefix.back());
    if (last < 0xff) {
      ++last;
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // every key
}

}  // namespace warden::engines::etcd

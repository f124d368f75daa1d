#include "engines/etcd/lock_keys.h"

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

LockKeys LockKeys::of(const std::string& prefix, const std::string& group,
                      const std::string& name) {
  LockKeys keys;
  keys.lock = prefix + '/' + group + '/' + escape_name(name) + '/';
  keys.writers = keys.lock + "w/";
  return keys;
}

std::string LockKeys::request(Mode mode, const std::string& id) const {
  return lock + (mode == Mode::exclusive ? "w/" : "s/") + id;
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

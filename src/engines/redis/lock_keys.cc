#include "engines/redis/lock_keys.h"

namespace warden::engines::redis {

LockKeys LockKeys::of(const std::string& group, const std::string& name) {
  const std::string prefix = "{warden:" + group + '/' + name + '}';
  return LockKeys{prefix + ":h", prefix + ":i", prefix + ":q",
                  prefix + ":w", prefix + ":p", prefix + ":c"};
}

std::string LockKeys::wake_list(const std::string& entry) const {
  return info.substr(0, info.size() - 1) + "k:" + entry;  // ":i" -> ":k:ENTRY"
}

LockKeys LockKeys::of(const core::LockKey& key) { return of(key.group, key.name); }

}  // namespace warden::engines::redis

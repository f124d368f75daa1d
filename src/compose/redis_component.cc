// compose/redis_component.cc — libwarden-redis registers redis://, rediss://,
// redis+sentinel://, redis+cluster:// and redlock:// as it is loaded.
#include <memory>

#include "compose/engine_registry.h"
#include "engines/redis/redis_config.h"
#include "engines/redis/redis_engine.h"
#include "engines/redlock/redlock_engine.h"

namespace warden::compose {
namespace {

std::unique_ptr<core::Engine> open_redis_component(const core::Uri& uri,
                                                   const ClientOptions& options) {
  if (uri.scheme == "redlock") return engines::redlock::open(uri, options);
  // layout=simple is the classic one-key lock: Redlock's algorithm on one master.
  const auto config = engines::redis::parse_config(uri, options);
  if (config.simple_lock_key) return engines::redlock::open_simple(config, options);
  return engines::redis::open(uri, options);
}

const bool registered = (register_component("redis", &open_redis_component), true);

}  // namespace
}  // namespace warden::compose

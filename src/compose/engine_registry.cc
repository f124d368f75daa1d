#include "compose/engine_registry.h"

#include <string>

#include "core/tls_options.h"
#include "engines/etcd/etcd_engine.h"
#include "engines/mem/mem_engine.h"
#include "engines/mysql/mysql_engine.h"
#include "engines/postgres/pg_engine.h"
#include "engines/redis/redis_engine.h"
#include "engines/redlock/redlock_engine.h"
#include "engines/warden/warden_engine.h"
#include "engines/zookeeper/zk_engine.h"
#include "warden/error.h"

namespace warden::compose {

std::unique_ptr<core::Engine> open_engine(const core::Uri& given, const ClientOptions& options) {
  core::Uri uri = given;
  core::resolve_tls_scheme(uri);  // rediss:// is redis://?tls=1, and so on
  if (uri.scheme == "mem") return engines::mem::open(uri, options);
  if (uri.scheme == "warden") return engines::wardend::open(uri, options);
  if (uri.scheme == "redis" || uri.scheme == "redis+sentinel" || uri.scheme == "redis+cluster") {
    // layout=simple is the classic one-key lock: Redlock's algorithm on one master.
    const auto config = engines::redis::parse_config(uri, options);
    if (config.simple_lock_key) return engines::redlock::open_simple(config, options);
    return engines::redis::open(uri, options);
  }
  if (uri.scheme == "redlock") return engines::redlock::open(uri, options);
  if (uri.scheme == "etcd") return engines::etcd::open(uri, options);
  if (uri.scheme == "zk") return engines::zookeeper::open(uri, options);
  if (uri.scheme == "postgres" || uri.scheme == "postgresql")
    return engines::postgres::open(uri, options);
  if (uri.scheme == "mysql") return engines::mysql::open(uri, options);
  throw Error(Errc::invalid_argument, "unknown URI scheme '" + uri.scheme +
                                          "' (this build knows: mem, warden, wardens, redis, "
                                          "rediss, redis+sentinel, redis+cluster, redlock, etcd, "
                                          "etcds, zk, postgres, postgresql, mysql)");
}

}  // namespace warden::compose

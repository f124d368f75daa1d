#include "engines/registry.h"

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

namespace warden::engines {

std::unique_ptr<core::Engine> open_engine(const core::Uri& given, const ClientOptions& options) {
  core::Uri uri = given;
  core::resolve_tls_scheme(uri);  // rediss:// is redis://?tls=1, and so on
  if (uri.scheme == "mem") return mem::open(uri, options);
  if (uri.scheme == "warden") return wardend::open(uri, options);
  if (uri.scheme == "redis" || uri.scheme == "redis+sentinel" || uri.scheme == "redis+cluster") {
    return redis::open(uri, options);
  }
  if (uri.scheme == "redlock") return redlock::open(uri, options);
  if (uri.scheme == "etcd") return etcd::open(uri, options);
  if (uri.scheme == "zk") return zookeeper::open(uri, options);
  if (uri.scheme == "postgres" || uri.scheme == "postgresql") return postgres::open(uri, options);
  if (uri.scheme == "mysql") return mysql::open(uri, options);
  throw Error(Errc::invalid_argument, "unknown URI scheme '" + uri.scheme +
                                          "' (this build knows: mem, warden, wardens, redis, "
                                          "rediss, redis+sentinel, redis+cluster, redlock, etcd, "
                                          "etcds, zk, postgres, postgresql, mysql)");
}

}  // namespace warden::engines

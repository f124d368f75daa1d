// Tagged waits (docs/protocol.md, WAITS) from the outside: redis-py, a RESP client that
// knows nothing of warden, speaks them to a live wardend (waits_redis_py.py says what it
// checks): answers tagged and out of order, WITHDRAW, and an untagged request refused
// with the connection closed.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "support/server_process.h"

namespace warden::testing {
namespace {

TEST(WaitsInterop, RedisPySpeaksTaggedWaitsToWardend) {
  Wardend server;
  TempDir dir;
  ServerProcess python({"/usr/bin/python3", WARDEN_WAITS_REDIS_PY_PATH,
                        std::to_string(server.port())},
                       dir.path() / "waits_redis_py.out");
  python.start();
  const int status = python.wait_exit(std::chrono::milliseconds(60'000));
  EXPECT_EQ(status, 0) << python.log_text();
}

}  // namespace
}  // namespace warden::testing

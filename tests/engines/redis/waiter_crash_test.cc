// redis:// when a waiting process dies with kill -9: nobody withdraws its queue entry,
// so the lock must not wait for it forever. Its liveness (waiter_ttl_ms, 1 s) runs out
// and the waiter behind it is granted — long before that waiter's own 30 s deadline.
#include <gtest/gtest.h>

#include <future>
#include <string>

#include "support/server_process.h"
#include "test_util.h"
#include "warden/client.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

TEST(RedisWaiterCrash, KilledHeadOfQueueIsSkippedWithinTheWaiterTtl) {
  RedisServer server;
  RedisProbe probe(server);
  TempDir dir("redis-child");
  constexpr auto kWaiterTtl = 1000ms;
  const std::string uri = uri_with(server, "waiter_ttl_ms=1000");
  Client holder = Client::open(uri);
  Client second = Client::open(uri);
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);

  ServerProcess child({lock_child_path(), "wait", uri, "g", "x", "exclusive"},
                      dir.path() / "child.log");
  child.start();
  ASSERT_TRUE(child.wait_for_log("acquiring", 10s)) << child.log_text();
  ASSERT_TRUE(eventually([&] { return queued(probe, "g", "x") == 1; }))
      << "the child never queued; its output:\n"
      << child.log_text();
  std::this_thread::sleep_for(300ms);  // it refreshes its liveness while it waits

  auto waiting = std::async(std::launch::async, [&] {
    return second.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(30s));
  });
  ASSERT_TRUE(eventually([&] { return queued(probe, "g", "x") == 2; }))
      << "the second waiter never queued behind the child";

  child.kill9();
  held.release();
  ASSERT_EQ(waiting.wait_for(30s + kNoHang), std::future_status::ready)
      << "a waiting acquire outlived its deadline";
  Lease lease = waiting.get();
  ASSERT_TRUE(lease) << "the waiter behind a dead one (waiter_ttl " << kWaiterTtl.count()
                     << " ms) was never granted; keys:" << describe(probe.warden_keys());
  EXPECT_EQ(child.log_text().find("granted"), std::string::npos)
      << "the killed child was granted:\n"
      << child.log_text();

  lease.release();
  EXPECT_TRUE(no_warden_keys(probe)) << "left:" << describe(probe.warden_keys());
}

}  // namespace
}  // namespace warden::testing

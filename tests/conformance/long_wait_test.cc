// Long waits: a wait far longer than every timeout the client has (op_timeout, the
// backend client library's own read timeouts, a poll's reply deadline) is an ordinary
// wait. It neither fails nor loses its place: when the holder lets go, the waiters are
// granted in the order they queued in.
#include <chrono>
#include <thread>

#include "conformance/conformance_suite.h"

namespace warden::conformance {
namespace {

// Every call of the waiters' clients is answered or failed within two seconds; the
// waits below last more than six. Two, not one: beside two CPU hogs and the sanitizer
// run, opening an etcd client over TLS (a handshake and a status call) has taken more
// than one second, which says nothing of long waits.
ClientOptions short_timeouts() {
  ClientOptions options;
  options.op_timeout = 2s;
  return options;
}

TEST_P(Conformance, AWaitLongerThanEveryTimeoutIsGrantedInQueueOrder) {
  const ClientOptions options = short_timeouts();
  Client holder = open_client();  // only the waiters' timeouts matter here
  Client first = open_client(options);
  Client second = open_client(options);
  Lease held = holder.lock(group(), "x", lock_options()).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);

  Holder one(first.lock(group(), "x", lock_options()), Mode::exclusive, Wait::up_to(kLongDeadline));
  ASSERT_TRUE(queue_reaches("x", 1));
  Holder two(second.lock(group(), "x", lock_options()), Mode::exclusive,
             Wait::up_to(kLongDeadline));
  ASSERT_TRUE(queue_reaches("x", 2));

  // The scenario itself, not a guess at a state: three op_timeouts of waiting.
  std::this_thread::sleep_for(3 * options.op_timeout + 500ms);
  EXPECT_FALSE(one.finished()) << "the first waiter gave up or failed during a long wait";
  EXPECT_FALSE(two.finished()) << "the second waiter gave up or failed during a long wait";

  held.release();
  if (!capabilities().fair) {
    // No queue to keep (redlock: waiters poll): both are served, in either order.
    ASSERT_TRUE(eventually([&] { return one.granted() || two.granted(); }));
    Holder& next = one.granted() ? one : two;
    Holder& last = one.granted() ? two : one;
    EXPECT_TRUE(next.release());
    EXPECT_TRUE(last.wait_granted(kPatience)) << "the other waiter was not granted";
    EXPECT_TRUE(last.release());
    return;
  }
  ASSERT_TRUE(one.wait_granted(kPatience)) << "the first waiter was not granted";
  EXPECT_FALSE(two.granted()) << "the second waiter passed the first";
  EXPECT_TRUE(one.release());
  EXPECT_TRUE(two.wait_granted(kPatience)) << "the second waiter was not granted";
  EXPECT_TRUE(two.release());
}

}  // namespace
}  // namespace warden::conformance

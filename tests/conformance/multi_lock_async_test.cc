// MultiLockConformance: MultiLock::acquire_async (warden/multi_lock.h, docs/async.md) on
// every engine — told exactly once off the caller's thread, with every member or none,
// and a wait that runs out, is cancelled or is granted late leaving nothing else behind.
#include <thread>

#include "conformance/multi_lock_suite.h"
#include "support/async_outcome.h"
#include "warden/multi_lock.h"

namespace warden::conformance {
namespace {

using MultiOutcome = testing::BasicAsyncOutcome<MultiLease>;

TEST_P(MultiLockConformance, AnAsyncAcquireIsToldOnceOffTheCallersThreadWithEveryMember) {
  Client a = open_client();
  MultiOutcome outcome;
  AcquireHandle handle = a.multi({{group(), "z"}, {group(), "x"}, {group(), "y"}}, lock_options())
                             .acquire_async(Wait::up_to(kLongDeadline), outcome.callback());
  ASSERT_TRUE(outcome.wait_for(kPatience));
  EXPECT_TRUE(handle.done());
  EXPECT_EQ(outcome.error(), nullptr);
  EXPECT_NE(outcome.thread(), std::this_thread::get_id());
  MultiLease held = outcome.take();
  ASSERT_TRUE(held);
  ASSERT_EQ(held.leases().size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(held.leases()[i].name(), std::string(1, static_cast<char>('x' + i)))
        << "taken in acquisition order";
    if (capabilities().fencing) EXPECT_GT(held.tokens()[i], 0u);
    EXPECT_FALSE(grantable(held.leases()[i].name()));
  }
  handle.cancel();  // too late: every member stays held
  EXPECT_FALSE(held.lost());
  held.release();
  for (const char* name : {"x", "y", "z"}) EXPECT_TRUE(freed(name)) << name;
  EXPECT_EQ(outcome.calls(), 1);
  EXPECT_THROW(
      a.multi({{group(), "x"}}, lock_options()).acquire_async(Wait::none(), nullptr), Error)
      << "an asynchronous acquire needs a callback";
}

// Behind a member another client holds: a wait cancelled at once, one that runs out and
// one cancelled while it waits each end empty with the member taken before released; one
// granted at the holder's release gets both members. Nothing of the three is left after.
TEST_P(MultiLockConformance, AnAsyncAcquireEndsEmptyOrWithEveryMemberAndLeavesNothing) {
  Client a = open_client();
  Client b = open_client();
  Lease middle = b.lock(group(), "m").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(middle);
  MultiLock pair = a.multi({{group(), "m"}, {group(), "a"}}, lock_options());

  MultiOutcome at_once;
  pair.acquire_async(Wait::forever(), at_once.callback()).cancel();
  ASSERT_TRUE(at_once.wait_for(kPatience));
  EXPECT_EQ(at_once.error(), nullptr);
  EXPECT_FALSE(at_once.granted());

  MultiOutcome ran_out;
  pair.acquire_async(Wait::up_to(300ms), ran_out.callback());
  ASSERT_TRUE(ran_out.wait_for(kPatience));
  EXPECT_EQ(ran_out.error(), nullptr);
  EXPECT_FALSE(ran_out.granted());
  EXPECT_TRUE(freed("a")) << "taken before m, then let go";

  MultiOutcome cancelled;
  AcquireHandle waiting = pair.acquire_async(Wait::forever(), cancelled.callback());
  ASSERT_TRUE(queue_reaches("m", 1)) << "the multi-lock waits for m";
  waiting.cancel();
  ASSERT_TRUE(cancelled.wait_for(kPatience));
  EXPECT_EQ(cancelled.error(), nullptr);
  EXPECT_FALSE(cancelled.granted());
  EXPECT_TRUE(queue_reaches("m", 0)) << "the cancelled wait left no trace";
  EXPECT_TRUE(freed("a"));

  MultiOutcome granted;
  pair.acquire_async(Wait::up_to(kLongDeadline), granted.callback());
  ASSERT_TRUE(queue_reaches("m", 1));
  EXPECT_EQ(granted.calls(), 0) << "granted while a member is held";
  middle.release();
  ASSERT_TRUE(granted.wait_for(kPatience));
  EXPECT_EQ(granted.error(), nullptr);
  MultiLease both = granted.take();
  ASSERT_TRUE(both) << "not granted at the holder's release";
  EXPECT_EQ(both.leases().size(), 2u);
  EXPECT_FALSE(grantable("m"));
  both.release();
  EXPECT_TRUE(freed("a"));
  EXPECT_TRUE(freed("m"));
  EXPECT_EQ(at_once.calls() + ran_out.calls() + cancelled.calls() + granted.calls(), 4);
}

}  // namespace
}  // namespace warden::conformance

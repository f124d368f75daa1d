// engines/resp_client/stop_waker.h: readable once its stop is requested, and the
// eventfds it reuses on a thread never carry one wait's stop into the next.
#include "engines/resp_client/stop_waker.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <stop_token>
#include <thread>

namespace warden::engines::resp_client {
namespace {

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

TEST(StopWaker, IsReadableOnceItsStopIsRequestedAndNotBefore) {
  std::stop_source source;
  const StopWaker waker(source.get_token());
  ASSERT_GE(waker.fd(), 0);
  EXPECT_FALSE(readable(waker.fd()));
  source.request_stop();
  EXPECT_TRUE(readable(waker.fd()));
}

TEST(StopWaker, AStopRequestedFromAnotherThreadWakesAPoll) {
  std::stop_source source;
  const StopWaker waker(source.get_token());
  std::jthread stopper([&] { source.request_stop(); });
  pollfd p{waker.fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 30'000), 1) << "not woken within 30 s";
}

TEST(StopWaker, ATokenThatCannotBeStoppedNeedsNoDescriptor) {
  const StopWaker waker{std::stop_token{}};
  EXPECT_EQ(waker.fd(), -1);
}

// A waker's descriptor is reused by the thread's next waker: the stop that made it
// readable must not wake a later wait whose own stop nobody requested.
TEST(StopWaker, AReusedDescriptorIsNotReadableForTheNextWait) {
  int first_fd = -1;
  {
    std::stop_source stopped;
    const StopWaker waker(stopped.get_token());
    first_fd = waker.fd();
    stopped.request_stop();
    ASSERT_TRUE(readable(first_fd));
  }
  std::stop_source fresh;
  const StopWaker next(fresh.get_token());
  EXPECT_EQ(next.fd(), first_fd) << "the thread's descriptor was not reused";
  EXPECT_FALSE(readable(next.fd())) << "the earlier wait's stop wakes this one";
  // Already stopped when made: readable at once.
  std::stop_source early;
  early.request_stop();
  const StopWaker late(early.get_token());
  EXPECT_TRUE(readable(late.fd()));
}

// Two wakers alive at once on one thread (a wait inside a wait) have a descriptor each.
TEST(StopWaker, WakersAliveAtOnceHaveDescriptorsOfTheirOwn) {
  std::stop_source outer_source, inner_source;
  const StopWaker outer(outer_source.get_token());
  const StopWaker inner(inner_source.get_token());
  ASSERT_NE(outer.fd(), inner.fd());
  inner_source.request_stop();
  EXPECT_TRUE(readable(inner.fd()));
  EXPECT_FALSE(readable(outer.fd()));
}

}  // namespace
}  // namespace warden::engines::resp_client

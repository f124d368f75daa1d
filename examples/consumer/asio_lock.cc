// An asio program that takes warden locks from coroutines, through the installed
// <warden/asio.h>: 200 coroutines on one io_context thread share one lock, each holding
// it across an asio timer; no two ever hold it at once, and each waits without a thread.
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <chrono>
#include <cstdio>
#include <warden/asio.h>
#include <warden/warden.h>

int main() {
  using namespace std::chrono_literals;
  constexpr int kCoroutines = 200;
  auto client = warden::Client::open("mem://asio-example");
  warden::Lock counter = client.lock("example", "counter");
  asio::io_context io;
  int inside = 0;
  int most_inside = 0;
  int done = 0;
  for (int i = 0; i < kCoroutines; ++i) {
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          warden::Lease lease = co_await warden::async_acquire(
              counter, warden::Mode::exclusive, warden::Wait::up_to(60s), asio::use_awaitable);
          if (!lease) co_return;
          ++inside;
          most_inside = std::max(most_inside, inside);
          asio::steady_timer pause(io, 100us);
          co_await pause.async_wait(asio::use_awaitable);
          --inside;
          ++done;
        },
        asio::detached);
  }
  io.run();
  std::printf("asio: %d of %d coroutines held the lock, at most %d at once\n", done, kCoroutines,
              most_inside);
  return done == kCoroutines && most_inside == 1 ? 0 : 1;
}

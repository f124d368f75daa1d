// torture/client_loop.h — one client process of a `warden torture` run: it takes the
// lock (a semaphore's permit, an election's leadership) over and over, writes to the resource with its fencing token while it holds it,
// and records what it saw as JSON lines (request, grant, timeout, error, lost,
// release). Every line is flushed as it is written, so a client killed by the nemesis
// loses nothing it had recorded.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "torture/primitive.h"

namespace warden::torture {

struct ClientLoopOptions {
  std::string url;
  int client = 0;            // this client's number in the run
  std::string socket_path;   // the resource
  std::string history_path;  // this client's events
  std::string lock_name = "lock";
  std::chrono::milliseconds ttl{1'000};
  std::chrono::milliseconds hold_min{5};   // each hold lasts a random time in
  std::chrono::milliseconds hold_max{50};  // [hold_min, hold_max]
  std::chrono::milliseconds wait{1'000};   // one acquire waits at most this long
  std::uint64_t seed = 1;
  Primitive primitive = Primitive::lock;  // what each acquire takes
  std::uint32_t permits = 2;              // the semaphore's number of permits
};

// Runs until SIGTERM or SIGINT (finishing the hold under way), then returns 0.
// Returns 1 (with a message on stderr) if the engine cannot be opened or the resource
// cannot be reached.
int run_client_loop(const ClientLoopOptions& options);

}  // namespace warden::torture

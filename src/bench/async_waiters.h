// bench/async_waiters.h — `warden bench --async-waiters N`: N asynchronous acquires
// waiting at once from one Client, and what they cost that process.
//
// Three rounds, each with a holder Client and a waiter Client in this process:
//   spread  — the holder takes N locks; the waiter asks for each with acquire_async; once
//             the backend shows them queued (Client::list), the process's threads and
//             resident memory are read; the holder releases everything; every wait must
//             be granted.
//   one     — N waits for one lock, asked in order with FIFO fairness where the engine
//             has it; granted one after another as each callback drops its Lease; the
//             order they were granted in is compared with the order they were asked in.
//   cancel  — N waits queued on N held locks are cancelled together; the time until every
//             callback has been told, and how many waiters the backend still lists after.
// Memory and threads are this process's (/proc/self/status): the waiting side's cost,
// with mem://'s table included, since it lives here.
#pragma once

#include <cstdint>
#include <string>

namespace warden::bench {

struct AsyncWaitersResult {
  std::uint64_t waiters = 0;
  bool listed = true;  // the engine lists waiters (else the queued figures are unknown)
  // spread
  long threads_before = 0;
  long threads_waiting = 0;
  long long rss_before_bytes = 0;
  long long rss_waiting_bytes = 0;
  long long heap_before_bytes = 0;   // malloc's bytes in use (mallinfo2)
  long long heap_waiting_bytes = 0;  // as the queue shows them all
  long long heap_settled_bytes = 0;  // once their calls under way are answered
  bool heap_settled = false;         // ... within 5 s
  double settle_seconds = 0;
  double queue_seconds = 0;  // asked → all shown queued
  double grant_seconds = 0;  // holder released → every callback granted
  std::uint64_t granted = 0;
  std::uint64_t failed = 0;  // callbacks told an error, in any round
  // one lock
  double one_lock_seconds = 0;
  std::uint64_t one_lock_granted = 0;
  bool one_lock_fifo = false;
  bool fifo_asked = false;  // the engine has FIFO fairness, so order was asked for
  // cancel
  double cancel_seconds = 0;
  std::uint64_t cancelled = 0;     // callbacks told "not granted"
  std::uint64_t left_waiting = 0;  // waiters the backend lists after the cancel
  double left_seconds = 0;         // from the cancel until it listed none (or gave up)
};

// Runs the three rounds on `url`, each in a group of its own ("bench-async-spread",
// "bench-async-one", "bench-async-cancel"). Throws warden::Error (engine failures) or
// std::runtime_error (a round that did not finish within its bound).
AsyncWaitersResult async_waiters(const std::string& url, std::uint64_t waiters);

}  // namespace warden::bench

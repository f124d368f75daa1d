// server/auth_worker.h — password checks off the event loop.
//
// One argon2id check costs tens of milliseconds and its hash's memory (64 MiB at
// --hash-password's cost). On wardend's single loop thread that would stall every
// connection for every AUTH, so the loop hands checks to a few threads of their own and
// gets each result back through `done`. At most `threads` checks run at once, so an AUTH
// flood costs at most threads * (the hash's memory); the dispatcher bounds how many
// wait (Limits::max_pending_auth).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace warden::server {

class AuthWorker {
 public:
  // Called on a worker thread with the check's id and whether the password matched.
  // Must be cheap and thread-safe (the server posts the result to its loop).
  using Done = std::function<void(std::uint64_t id, bool matched)>;

  AuthWorker(std::size_t threads, Done done);
  // Finishes the checks running, drops the queued ones (their `done` is never called)
  // and joins the threads.
  ~AuthWorker();
  AuthWorker(const AuthWorker&) = delete;
  AuthWorker& operator=(const AuthWorker&) = delete;

  // Queues a check of `password` against `hash`. Never blocks.
  void submit(std::uint64_t id, std::string hash, std::string password);

 private:
  struct Job {
    std::uint64_t id;
    std::string hash;
    std::string password;
  };
  void loop();

  // Constant after construction.
  Done done_;
  std::vector<std::thread> threads_;

  // Protected by mutex_.
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> jobs_;
  bool stopping_ = false;
};

}  // namespace warden::server

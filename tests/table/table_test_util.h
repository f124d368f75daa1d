// tests/table/table_test_util.h — small helpers shared by the lock table's tests.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "table/lock_table.h"

namespace warden::table::testing {

// Tests speak in milliseconds after an arbitrary origin; the origin is far from the
// clock's epoch so that "a deadline in the past" is representable without wrapping.
inline Time at(std::int64_t ms) { return Time{} + std::chrono::hours(1) + milliseconds(ms); }

// Request builder: R::exclusive("k").ttl(100).until(at(50)).
class R {
 public:
  static R exclusive(std::string key = "k") { return R(Mode::exclusive, std::move(key)); }
  static R shared(std::string key = "k") { return R(Mode::shared, std::move(key)); }
  // `permits` of a semaphore of `capacity` permits.
  static R permits(std::uint32_t permits, std::uint32_t capacity, std::string key = "k") {
    R r(Mode::shared, std::move(key));
    r.r_.permits = permits;
    r.r_.capacity = capacity;
    return r;
  }

  R& ttl(std::int64_t ms) {
    r_.ttl = milliseconds(ms);
    return *this;
  }
  R& lock_delay(std::int64_t ms) {
    r_.lock_delay = milliseconds(ms);
    return *this;
  }
  R& non_fair() {
    r_.fair = false;
    return *this;
  }
  R& until(Time deadline) {
    r_.deadline = deadline;
    return *this;
  }
  R& session(std::uint64_t s) {
    r_.session = s;
    return *this;
  }
  R& value(std::string v) {
    r_.value = std::move(v);
    return *this;
  }
  operator const Request&() const { return r_; }  // NOLINT: lets tests pass R as a Request

 private:
  R(Mode mode, std::string key) {
    r_.key = std::move(key);
    r_.mode = mode;
  }
  Request r_;
};

using Kind = Event::Kind;

// (kind, request id) of each event, which is what most tests check.
inline std::vector<std::pair<Kind, RequestId>> summary(const std::vector<Event>& events) {
  std::vector<std::pair<Kind, RequestId>> out;
  for (const Event& e : events) out.emplace_back(e.kind, e.grant.id);
  return out;
}

inline std::vector<RequestId> holder_ids(const KeyInfo& info) {
  std::vector<RequestId> ids;
  for (const HolderInfo& h : info.holders) ids.push_back(h.id);
  return ids;
}

inline std::vector<RequestId> waiter_ids(const KeyInfo& info) {
  std::vector<RequestId> ids;
  for (const WaiterInfo& w : info.waiters) ids.push_back(w.id);
  return ids;
}

// A fresh table per test, with shorthands that also check the expected outcome.
class LockTableTest : public ::testing::Test {
 protected:
  AcquireResult acquire(const Request& r, Time now = at(0)) { return table_.acquire(r, now); }
  // Acquires and expects a grant; returns it.
  Grant grant(const Request& r, Time now = at(0)) {
    AcquireResult res = table_.acquire(r, now);
    EXPECT_EQ(res.status, AcquireStatus::granted);
    return res.grant;
  }
  // Acquires and expects to be queued; returns the request id.
  RequestId queue(const Request& r, Time now = at(0)) {
    AcquireResult res = table_.acquire(r, now);
    EXPECT_EQ(res.status, AcquireStatus::queued);
    return res.id;
  }
  std::vector<std::pair<Kind, RequestId>> events() { return summary(table_.take_events()); }

  LockTable table_;
};

}  // namespace warden::table::testing

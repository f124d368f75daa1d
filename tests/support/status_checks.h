// support/status_checks.h — what every engine's inspect_test.cc checks beyond the
// conformance clauses (tests/conformance/status_test.cc), written once.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <string>

#include "warden/client.h"
#include "warden/error.h"

namespace warden::testing {

// Client::inspect and Client::list on a backend that is down both throw Error with one
// of `codes` (a suspended ZooKeeper session may fail on its own timeout instead).
inline void expect_status_fails(const Client& client,
                                std::initializer_list<Errc> codes = {Errc::unavailable}) {
  const std::function<void()> calls[] = {[&] { (void)client.inspect("g", "n"); },
                                         [&] { (void)client.list("g"); }};
  for (const auto& call : calls) {
    try {
      call();
      ADD_FAILURE() << "no error from a backend that is down";
    } catch (const Error& e) {
      EXPECT_TRUE(std::find(codes.begin(), codes.end(), e.code()) != codes.end()) << e.what();
    }
  }
}

// While `holder` holds g/n, repeated inspect and list calls leave the backend's own
// records — `records()`, read behind the engine's back — exactly as they were.
inline void expect_status_reads_only(const Client& holder,
                                     const std::function<std::string()>& records) {
  const std::string before = records();
  for (int i = 0; i < 3; ++i) {
    (void)holder.inspect("g", "n");
    (void)holder.list("g");
  }
  EXPECT_EQ(records(), before);
}

}  // namespace warden::testing

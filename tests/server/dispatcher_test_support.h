// What the dispatcher's tests share: the fake clock's times and the plainest replies, as
// the bytes the dispatcher writes.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/dispatcher.h"

namespace warden::server {

// Milliseconds after an arbitrary origin, far from the clock's epoch.
inline Time at(std::int64_t ms) {
  return Time{} + std::chrono::hours(1) + std::chrono::milliseconds(ms);
}

inline const std::string kNil = "$-1\r\n";
inline const std::string kOk = "+OK\r\n";
inline const std::string kOne = ":1\r\n";
inline const std::string kZero = ":0\r\n";

inline std::string bulk(std::string_view s) {
  return "$" + std::to_string(s.size()) + "\r\n" + std::string(s) + "\r\n";
}

}  // namespace warden::server

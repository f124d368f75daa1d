// How `warden status` prints a holder whose token the engine cannot tell (token 0,
// never a real token): "unknown" in the table, null in JSON, never the 0 itself.
#include "cli/status_format.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>

namespace warden::cli::testing {
namespace {

LockStatus held_with_token(std::uint64_t token) {
  LockStatus s;
  s.group = "g";
  s.name = "x";
  s.holders.push_back(HolderStatus{Mode::exclusive, token, std::nullopt});
  return s;
}

TEST(StatusFormat, AKnownTokenIsPrinted) {
  const std::string text = lock_text(held_with_token(42));
  EXPECT_TRUE(std::regex_search(text, std::regex("\n +exclusive +42 +session\n"))) << text;
  const auto j = nlohmann::json::parse(lock_json("mysql://h/db", held_with_token(42)));
  EXPECT_EQ(j["holders"][0]["token"], 42);
}

TEST(StatusFormat, AnUnknownTokenIsSaidToBeUnknown) {
  const std::string text = lock_text(held_with_token(0));
  EXPECT_TRUE(std::regex_search(text, std::regex("\n +exclusive +unknown +session\n"))) << text;
  const auto j = nlohmann::json::parse(lock_json("mysql://h/db", held_with_token(0)));
  EXPECT_TRUE(j["holders"][0]["token"].is_null()) << j.dump();
}

TEST(StatusFormat, ASemaphoreSaysItsPermitsAndEachGrantsShare) {
  LockStatus s;
  s.group = "media";
  s.name = "enc";
  s.permits = 4;
  s.holders.push_back(HolderStatus{Mode::shared, 7, std::chrono::milliseconds(900), 3});
  s.waiters.push_back(WaiterStatus{Mode::shared, std::nullopt, 2});
  const std::string text = lock_text(s);
  EXPECT_NE(text.find("  a semaphore of 4 permits, 3 held\n"), std::string::npos) << text;
  EXPECT_TRUE(std::regex_search(text, std::regex("\n +permits:3 +7 +900\n"))) << text;
  EXPECT_TRUE(std::regex_search(text, std::regex("\n +permits:2 +none\n"))) << text;
  const auto j = nlohmann::json::parse(lock_json("warden://h:1", s));
  EXPECT_EQ(j["permits"], 4);
  EXPECT_EQ(j["holders"][0]["permits"], 3);
  EXPECT_EQ(j["waiters"][0]["permits"], 2);
  // A lock's JSON has no such keys.
  const auto lock = nlohmann::json::parse(lock_json("mysql://h/db", held_with_token(42)));
  EXPECT_FALSE(lock.contains("permits"));
  EXPECT_FALSE(lock["holders"][0].contains("permits"));
}

}  // namespace
}  // namespace warden::cli::testing

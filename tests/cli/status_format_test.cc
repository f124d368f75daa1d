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

}  // namespace
}  // namespace warden::cli::testing

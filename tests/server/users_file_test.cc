// tests/server/users_file_test.cc — the users file parser (server/users_file.h): what a
// good file gives, and every defect rejected with FILE:LINE and why, hostile input
// included, without ever quoting a hash.
#include "server/users_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "server/rights.h"
#include "warden/error.h"

namespace warden::server {
namespace {

// A well-formed hash (libsodium's form, at --hash-password's cost); its password is
// irrelevant to the parser.
const std::string kHash =
    "$argon2id$v=19$m=65536,t=2,p=1$K09B7u9hNHMhQZuuQ/pLRA$"
    "91XKDyNJOY5rYKkTAi+WNKxi/V09WMK+JPJ2itpkY5g";

std::string user_line(const std::string& name, const std::string& groups = "g",
                      const std::string& rights = "lock") {
  return name + " " + kHash + " " + groups + " " + rights + "\n";
}

// The message of the Error parse_users throws (invalid_argument), or "" if it parsed.
std::string defect(const std::string& text) {
  try {
    (void)parse_users(text, "users.txt");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    std::string message = e.what();
    constexpr std::string_view kCode = "invalid_argument: ";
    if (message.starts_with(kCode)) message.erase(0, kCode.size());
    EXPECT_EQ(message.find("K09B7u9h"), std::string::npos) << "a hash was quoted: " << message;
    return message;
  }
  return "";
}

TEST(UsersFileTest, GoodFileGivesEachUserItsHashGroupsAndRights) {
  const auto table = parse_users(
      "# who may lock what\n"
      "\n"
      "   # an indented comment\n"
      "billing\t" +
          kHash + "  billing,inv-*,a?c\tlock,inspect\n" + user_line("ops", "*", "admin") + "last " +
          kHash + " x lock",  // no final line end
      "users.txt");
  ASSERT_EQ(table.size(), 3u);
  const User* billing = table.find("billing");
  ASSERT_NE(billing, nullptr);
  EXPECT_EQ(billing->hash, kHash);
  EXPECT_EQ(billing->groups, (std::vector<std::string>{"billing", "inv-*", "a?c"}));
  EXPECT_EQ(billing->rights, kRightLock | kRightInspect);
  EXPECT_EQ(table.find("ops")->rights, kRightAdmin);
  EXPECT_NE(table.find("last"), nullptr);
  EXPECT_EQ(table.find("nobody"), nullptr);
  EXPECT_EQ(table.decoy_hash(), kHash);
}

TEST(UsersFileTest, EmptyFileHasNoUsersAndABuiltInDecoy) {
  const auto table = parse_users("# nobody yet\n\n", "users.txt");
  EXPECT_EQ(table.size(), 0u);
  EXPECT_TRUE(table.decoy_hash().starts_with("$argon2id$v=19$m=65536,t=2,p=1$"));
}

TEST(UsersFileTest, WindowsLineEndsAreAccepted) {
  EXPECT_EQ(parse_users("a " + kHash + " g lock\r\n", "f").size(), 1u);
}

TEST(UsersFileTest, EveryDefectNamesTheFileTheLineAndWhy) {
  const std::string ok = user_line("ok");
  struct Case {
    std::string text;
    std::string message;
  };
  const std::vector<Case> cases = {
      {ok + user_line("ok"), "users.txt:2: user 'ok' is defined twice"},
      {ok + "x " + kHash + " g lock,fly\n",
       "users.txt:2: unknown right 'fly' (rights are lock, inspect, admin)"},
      {"x " + kHash + " g lock,lock\n", "users.txt:1: right 'lock' given twice"},
      {"x " + kHash + " g \n",
       "users.txt:1: expected 4 fields (name, password hash, groups, "
       "rights), found 3"},
      {"x " + kHash + " g lock extra\n",
       "users.txt:1: more than 4 fields (name, password hash, groups, rights)"},
      {"x $2b$10$abcdefghijklmnopqrstuv g lock\n",
       "users.txt:1: the password hash is not an argon2id hash (it must start with $argon2id$; "
       "make one with wardend --hash-password)"},
      {"x plaintext-password g lock\n",
       "users.txt:1: the password hash is not an argon2id hash "
       "(it must start with $argon2id$; make one with wardend "
       "--hash-password)"},
      {"x " + kHash + " a,,b lock\n", "users.txt:1: an empty group pattern (check the commas)"},
      {"x " + kHash + " g/h lock\n",
       "users.txt:1: group pattern (3 bytes, not shown) is not "
       "1..64 of [A-Za-z0-9._-] and the wildcards * ?"},
      {"default " + kHash + " g lock\n",
       "users.txt:1: the name 'default' is reserved for the --requirepass user"},
      {"b@d " + kHash + " g lock\n",
       "users.txt:1: user name (3 bytes, not shown) is not 1..64 of [A-Za-z0-9._-]"},
      {"x $argon2id$v=19$m=1048576,t=2,p=1$K09B7u9hNHMhQZuuQ/pLRA$"
       "91XKDyNJOY5rYKkTAi+WNKxi/V09WMK+JPJ2itpkY5g g lock\n",
       "users.txt:1: the hash's m is not a number in 1..262144"},
      {"x $argon2id$v=19$m=65536,t=2,p=4$K09B7u9hNHMhQZuuQ/pLRA$"
       "91XKDyNJOY5rYKkTAi+WNKxi/V09WMK+JPJ2itpkY5g g lock\n",
       "users.txt:1: the hash's p is not a number in 1..1"},
      {"x $argon2id$v=19$m=65536,t=2,p=1$K09B7u9hNHMhQZuuQ/pLRA g lock\n",
       "users.txt:1: the password hash has not 5 $-separated parts"},
      {ok + "x " + kHash + std::string(" g lo\0ck\n", 9), "users.txt:2: a NUL byte"},
      {"x " + kHash + " g lock\x01\n",
       "users.txt:1: a control or non-ASCII byte outside a comment"},
  };
  for (const auto& c : cases) EXPECT_EQ(defect(c.text), c.message) << c.text;
}

TEST(UsersFileTest, NulInsideALineIsFoundEvenInAComment) {
  EXPECT_EQ(defect(std::string("# a\0b\n", 6)), "users.txt:1: a NUL byte");
}

TEST(UsersFileTest, HugeLineIsRejectedWithoutBeingRead) {
  const std::string huge(10 * 1024 * 1024, 'a');
  EXPECT_EQ(defect(user_line("ok") + huge), "users.txt:2: line longer than 1024 bytes");
}

TEST(UsersFileTest, BinaryGarbageIsRejected) {
  std::string garbage;
  for (int i = 0; i < 4096; ++i) garbage += static_cast<char>((i * 7919) & 0xff);
  EXPECT_NE(defect(garbage), "");
}

TEST(UsersFileTest, MoreThanTheUserLimitIsRejectedOnTheFirstLineOver) {
  std::string text;
  for (std::size_t i = 0; i < 100'000; ++i) text += user_line("u" + std::to_string(i));
  EXPECT_EQ(defect(text), "users.txt:10001: more than 10000 users");
  // Exactly the limit is fine.
  std::string at_limit;
  for (std::size_t i = 0; i < kMaxUsers; ++i) at_limit += user_line("u" + std::to_string(i));
  EXPECT_EQ(parse_users(at_limit, "f").size(), kMaxUsers);
}

TEST(UsersFileTest, PasswordLikeFieldsAreNotQuoted) {
  const std::string message = defect("x " + kHash + " g hunter2!\n");
  EXPECT_EQ(message.find("hunter2"), std::string::npos) << message;
}

TEST(UsersFileTest, ReadingAFileThatIsMissingADirectoryOrTooLargeIsAClearError) {
  const auto dir = std::filesystem::temp_directory_path() / "warden-users-file-test";
  std::filesystem::create_directories(dir);
  const auto expect_error = [](const std::string& path, const std::string& why) {
    try {
      (void)read_users_file(path);
      ADD_FAILURE() << "read " << path;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument);
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  expect_error((dir / "missing").string(), "not a regular file");
  expect_error(dir.string(), "not a regular file");
  const auto big = dir / "big";
  {
    std::ofstream out(big);
    out << std::string(kMaxUsersFileBytes + 1, '#');
  }
  expect_error(big.string(), "larger than");
  const auto good = dir / "good";
  {
    std::ofstream out(good);
    out << user_line("a");
  }
  EXPECT_EQ(read_users_file(good.string())->size(), 1u);
  std::filesystem::remove_all(dir);
}

TEST(RightsTest, GlobsMatchWholeGroupNames) {
  EXPECT_TRUE(glob_matches("*", "anything"));
  EXPECT_TRUE(glob_matches("billing", "billing"));
  EXPECT_FALSE(glob_matches("billing", "billing2"));
  EXPECT_TRUE(glob_matches("inv-*", "inv-"));
  EXPECT_TRUE(glob_matches("inv-*", "inv-2026"));
  EXPECT_FALSE(glob_matches("inv-*", "xinv-1"));
  EXPECT_TRUE(glob_matches("a?c", "abc"));
  EXPECT_FALSE(glob_matches("a?c", "ac"));
  EXPECT_TRUE(glob_matches("*a*b*", "xxaxxbxx"));
  EXPECT_FALSE(glob_matches("*a*b", "xxaxxbxxc"));
  // A pathological pattern stays cheap (no exponential backtracking).
  EXPECT_FALSE(glob_matches(std::string(32, '*') + "b", std::string(64, 'a')));
}

TEST(RightsTest, AdminIncludesEveryRight) {
  EXPECT_TRUE(has_right(kRightAdmin, kRightLock));
  EXPECT_TRUE(has_right(kRightAdmin, kRightInspect));
  EXPECT_FALSE(has_right(kRightLock, kRightInspect));
  EXPECT_EQ(required_right("ACQUIRE"), kRightLock);
  EXPECT_EQ(required_right("LIST"), kRightInspect);
  EXPECT_EQ(required_right("PING"), 0);
}

}  // namespace
}  // namespace warden::server

// tests/server/users_server_test.cc — wardend --users as a process on loopback, driven by
// hiredis the way a Redis 6 client sends AUTH user password: rights per group, a SIGHUP
// reload that changes them, a bad file on reload that keeps the old table, a bad file at
// start, and --hash-password.
#include <gtest/gtest.h>
#include <hiredis.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "server/password_hash.h"
#include "support/async_outcome.h"
#include "support/server_process.h"
#include "support/waiting.h"
#include "warden/async.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// One hiredis connection; replies as text: "+OK", "-NOPERM ...", ":1", "[...]".
class Redis {
 public:
  explicit Redis(std::uint16_t port) {
    ctx_ = redisConnectWithTimeout("127.0.0.1", port, timeval{10, 0});
    if (ctx_ == nullptr || ctx_->err) throw std::runtime_error("hiredis cannot connect");
    redisSetTimeout(ctx_, timeval{10, 0});
  }
  ~Redis() { redisFree(ctx_); }
  Redis(const Redis&) = delete;
  Redis& operator=(const Redis&) = delete;

  std::string operator()(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(ctx_, static_cast<int>(args.size()), argv.data(), lens.data()));
    if (r == nullptr) return "<no reply>";
    std::string text;
    switch (r->type) {
      case REDIS_REPLY_STATUS:
        text = "+" + std::string(r->str, r->len);
        break;
      case REDIS_REPLY_ERROR:
        text = "-" + std::string(r->str, r->len);
        break;
      case REDIS_REPLY_INTEGER:
        text = ":" + std::to_string(r->integer);
        break;
      case REDIS_REPLY_ARRAY:
        text = "[array]";
        break;
      default:
        text = "?";
    }
    freeReplyObject(r);
    return text;
  }

 private:
  redisContext* ctx_ = nullptr;
};

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

// A users file for `lines` of "name password groups rights" (hashed here, cheaply).
std::string users_text(const std::vector<std::vector<std::string>>& lines) {
  std::string text = "# users\n";
  for (const auto& l : lines) {
    text += l[0] + " " + server::hash_password(l[1], server::kMinimumCost) + " " + l[2] + " " +
            l[3] + "\n";
  }
  return text;
}

// Sends SIGHUP and waits for the reload's line on the server's log (its n-th).
bool reload(Wardend& server, const std::string& expected_line) {
  server.process().signal(SIGHUP);
  return server.process().wait_for_log(expected_line, 10s);
}

class WardendUsersTest : public ::testing::Test {
 protected:
  WardendUsersTest() : file_(dir_.path() / "users") {
    write_file(file_, users_text({{"billing", "b-pass", "billing,inv-*", "lock"},
                                  {"auditor", "a-pass", "*", "inspect"}}));
  }
  TempDir dir_{"wardend-users"};
  fs::path file_;
};

TEST_F(WardendUsersTest, AuthUserPasswordThenRightsPerGroupPattern) {
  Wardend server({"--users", file_.string()});
  Redis billing(server.port());
  EXPECT_EQ(billing({"PING"}), "-NOAUTH authentication required");
  EXPECT_EQ(billing({"AUTH", "billing", "a-pass"}), "-WRONGPASS invalid user name or password");
  EXPECT_EQ(billing({"AUTH", "nobody", "b-pass"}), "-WRONGPASS invalid user name or password");
  EXPECT_EQ(billing({"AUTH", "b-pass"}), "-WRONGPASS invalid user name or password");
  EXPECT_EQ(billing({"AUTH", "billing", "b-pass"}), "+OK");
  EXPECT_EQ(billing({"ACQUIRE", "billing/k", "x", "30000"}), "[array]");
  EXPECT_EQ(billing({"ACQUIRE", "inv-7/k", "x", "30000"}), "[array]");
  EXPECT_EQ(billing({"ACQUIRE", "orders/k", "x", "30000"}),
            "-NOPERM user 'billing' has no access to group 'orders'");
  EXPECT_EQ(billing({"INSPECT", "billing/k"}),
            "-NOPERM user 'billing' has no inspect right for INSPECT");

  Redis auditor(server.port());
  EXPECT_EQ(auditor({"AUTH", "auditor", "a-pass"}), "+OK");
  EXPECT_EQ(auditor({"INSPECT", "orders/k"}), "[array]");
  EXPECT_EQ(auditor({"CHECK", "billing/k", "x", "1"}),
            "-NOPERM user 'auditor' has no lock right for CHECK");
}

TEST_F(WardendUsersTest, RequestsPipelinedBehindAnAuthRunAfterItAsThatUser) {
  Wardend server({"--users", file_.string()});
  // hiredis queues both before reading: the ACQUIRE waits behind the parked AUTH.
  redisContext* c = redisConnectWithTimeout("127.0.0.1", server.port(), timeval{10, 0});
  ASSERT_TRUE(c != nullptr && c->err == 0);
  redisSetTimeout(c, timeval{10, 0});
  redisAppendCommand(c, "AUTH billing b-pass");
  redisAppendCommand(c, "ACQUIRE billing/p x 30000");
  void* reply = nullptr;
  ASSERT_EQ(redisGetReply(c, &reply), REDIS_OK);
  EXPECT_EQ(static_cast<redisReply*>(reply)->type, REDIS_REPLY_STATUS);
  freeReplyObject(reply);
  ASSERT_EQ(redisGetReply(c, &reply), REDIS_OK);
  EXPECT_EQ(static_cast<redisReply*>(reply)->type, REDIS_REPLY_ARRAY);
  freeReplyObject(reply);
  redisFree(c);
}

TEST_F(WardendUsersTest, SighupReloadChangesRightsAndABadFileKeepsTheOldOnes) {
  Wardend server({"--users", file_.string()});
  Redis billing(server.port());
  ASSERT_EQ(billing({"AUTH", "billing", "b-pass"}), "+OK");
  ASSERT_TRUE(billing({"ACQUIRE", "orders/k", "x", "30000"}).starts_with("-NOPERM"));

  write_file(file_, users_text({{"billing", "b-pass", "orders", "lock"}}));
  ASSERT_TRUE(reload(server, "reloaded 1 user(s)")) << server.process().log_text();
  // The connection keeps its user; the user's new rights apply to its next command.
  EXPECT_EQ(billing({"ACQUIRE", "orders/k", "x", "30000"}), "[array]");
  EXPECT_TRUE(billing({"ACQUIRE", "billing/k", "x", "30000"}).starts_with("-NOPERM"));

  write_file(file_, users_text({{"billing", "b-pass", "*", "lock"}}) + "oops\n");
  ASSERT_TRUE(reload(server, "kept the users in use")) << server.process().log_text();
  const std::string log = server.process().log_text();
  EXPECT_NE(log.find(file_.string() + ":3: expected 4 fields"), std::string::npos) << log;
  EXPECT_EQ(log.find("$argon2id$"), std::string::npos) << "a hash reached the log";
  EXPECT_TRUE(billing({"ACQUIRE", "billing/k", "x", "30000"}).starts_with("-NOPERM"));
  EXPECT_EQ(billing({"PING"}), "+PONG");
}

// A warden Client whose user is removed by a reload is refused (permission_denied), on
// its pooled connections and on its wait channel alike; once a reload adds the user back,
// the same Client works again: the connections the server stopped taking as
// authenticated are not reused, and new ones authenticate again.
TEST_F(WardendUsersTest, AClientWorksAgainOnceItsRemovedUserIsAddedBack) {
  Wardend server({"--users", file_.string()});
  Client client = Client::open("warden://billing:b-pass@127.0.0.1:" + std::to_string(server.port()),
                               quick_options());
  Lock lock = client.lock("billing", "k");
  const auto try_blocking = [&]() -> std::string {
    try {
      Lease lease = lock.acquire(Mode::exclusive, Wait::none());
      return lease ? "granted" : "busy";
    } catch (const Error& e) {
      return e.code() == Errc::permission_denied ? "refused" : e.what();
    }
  };
  const auto try_async = [&]() -> std::string {
    AsyncOutcome outcome;
    lock.acquire_async(Mode::exclusive, Wait::none(), outcome.callback());
    if (!outcome.wait_for(30s)) return "untold";
    if (outcome.error() == nullptr) return outcome.take() ? "granted" : "busy";
    try {
      std::rethrow_exception(outcome.error());
    } catch (const Error& e) {
      return e.code() == Errc::permission_denied ? "refused" : e.what();
    }
  };
  ASSERT_EQ(try_blocking(), "granted");
  ASSERT_EQ(try_async(), "granted");

  write_file(file_, users_text({{"auditor", "a-pass", "*", "inspect"}}));
  ASSERT_TRUE(reload(server, "reloaded 1 user(s)")) << server.process().log_text();
  EXPECT_EQ(try_blocking(), "refused");
  EXPECT_EQ(try_async(), "refused");

  write_file(file_, users_text({{"billing", "b-pass", "billing", "lock"},
                                {"auditor", "a-pass", "*", "inspect"}}));
  ASSERT_TRUE(reload(server, "reloaded 2 user(s)")) << server.process().log_text();
  EXPECT_EQ(try_blocking(), "granted");
  EXPECT_EQ(try_async(), "granted");
}

TEST_F(WardendUsersTest, BadFileAtStartIsRefusedNamingTheLine) {
  write_file(file_, users_text({{"a", "p", "g", "lock"}, {"a", "p", "g", "lock"}}));
  const fs::path log = dir_.path() / "log";
  const std::string command = wardend_path() + " --listen 127.0.0.1:0 --data-dir " +
                              (dir_.path() / "data").string() + " --users " + file_.string() +
                              " > " + log.string() + " 2>&1";
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find(file_.string() + ":3: user 'a' is defined twice"), std::string::npos) << text;
}

// Runs `wardend --hash-password` with stdin from printf(1) of `format`: (exit status,
// stdout).
std::pair<int, std::string> hash_password_command(const std::string& format) {
  const std::string command =
      "printf '" + format + "' | " + wardend_path() + " --hash-password 2>/dev/null";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed");
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) out += buf;
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(WardendHashPasswordTest, PrintsOneArgon2idLineForThePasswordOnStdin) {
  const auto [status, out] = hash_password_command("s3cret pass\\n");
  ASSERT_EQ(status, 0);
  ASSERT_TRUE(out.starts_with("$argon2id$v=19$m=65536,t=2,p=1$")) << out;
  ASSERT_TRUE(out.ends_with("\n"));
  const std::string hash = out.substr(0, out.size() - 1);
  EXPECT_TRUE(server::verify_password(hash, "s3cret pass"));
  EXPECT_FALSE(server::verify_password(hash, "s3cret pass\n"));
  EXPECT_EQ(hash_password_command("").first, 64);
}

}  // namespace
}  // namespace warden::testing

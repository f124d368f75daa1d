// wardend --config FILE: the file's keys are the long options, flags win over it, and a
// file wardend cannot use stops it with status 64 before it listens.
#include <gtest/gtest.h>
#include <hiredis.h>
#include <sys/wait.h>

#include <fstream>
#include <memory>
#include <string>

#include "support/server_process.h"

namespace warden::testing {
namespace {

namespace fs = std::filesystem;

struct FreeContext {
  void operator()(redisContext* c) const { redisFree(c); }
};

// One command's reply as text (status, error or bulk string).
std::string call(std::uint16_t port, const std::string& command, const std::string& arg) {
  std::unique_ptr<redisContext, FreeContext> c(redisConnect("127.0.0.1", port));
  if (!c || c->err) return "connect failed";
  auto* reply = static_cast<redisReply*>(
      redisCommand(c.get(), "%s %b", command.c_str(), arg.data(), arg.size()));
  if (reply == nullptr) return "no reply";
  std::string text(reply->str ? reply->str : "", reply->str ? reply->len : 0);
  freeReplyObject(reply);
  return text;
}

void write_file(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

// Runs wardend with `args` to its exit (it must not start serving); returns the exit
// status and leaves stdout and stderr in `log`.
int run_to_exit(const std::string& args, const fs::path& log) {
  const std::string command = wardend_path() + " " + args + " >'" + log.string() + "' 2>&1";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(WardendConfigFile, TheFileSetsOptionsAndFlagsWinOverIt) {
  TempDir dir("wardend-config");
  const fs::path config = dir.path() / "wardend.conf";
  // The file asks for a port nobody listens on and a small request limit; the fixture's
  // --listen and --data-dir flags must win, the limit must apply.
  write_file(config, "# comment\nlisten = \"127.0.0.1:" + std::to_string(free_port()) +
                         "\"\nmax-request-bytes = 1024\n");
  Wardend server({"--config", config.string()});
  EXPECT_EQ(call(server.port(), "PING", std::string(900, 'm')), std::string(900, 'm'));
  EXPECT_NE(call(server.port(), "PING", std::string(2000, 'm')).find("larger than 1024"),
            std::string::npos);
}

TEST(WardendConfigFile, AFileItCannotUseStopsItWithUsageStatus) {
  TempDir dir("wardend-config");
  const fs::path log = dir.path() / "out.log";
  const std::string data = " --data-dir '" + (dir.path() / "data").string() + "'";
  const std::string listen = " --listen 127.0.0.1:" + std::to_string(free_port());

  EXPECT_EQ(
      run_to_exit("--config '" + (dir.path() / "missing.conf").string() + "'" + data + listen, log),
      64);
  EXPECT_NE(read_file(log).find("missing.conf"), std::string::npos) << read_file(log);

  write_file(dir.path() / "typo.conf", "max-conections = 5\n");
  EXPECT_EQ(
      run_to_exit("--config '" + (dir.path() / "typo.conf").string() + "'" + data + listen, log),
      64);
  EXPECT_NE(read_file(log).find("max-conections"), std::string::npos) << read_file(log);

  write_file(dir.path() / "reset.conf", "reset-state = true\n");
  EXPECT_EQ(
      run_to_exit("--config '" + (dir.path() / "reset.conf").string() + "'" + data + listen, log),
      64);
  EXPECT_NE(read_file(log).find("reset-state"), std::string::npos) << read_file(log);
  EXPECT_FALSE(fs::exists(dir.path() / "data")) << "wardend started although its config was bad";
}

}  // namespace
}  // namespace warden::testing

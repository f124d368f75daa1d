// tests/server/server_test.cc — a live wardend process on loopback, driven through raw
// sockets (exact bytes, half-sent frames, a thousand connections) and hiredis: bad
// input, pipelining, parked requests, limits, the password, metrics, shutdown, and what
// survives kill -9.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <hiredis.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "support/server_process.h"
#include "support/text_client.h"

extern char** environ;

namespace warden::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

// --- RESP on the client side

// Where the RESP value starting at `pos` ends; npos while it is incomplete.
std::size_t value_end(const std::string& b, std::size_t pos) {
  if (pos >= b.size()) return std::string::npos;
  const std::size_t eol = b.find("\r\n", pos);
  if (eol == std::string::npos) return std::string::npos;
  switch (b[pos]) {
    case '+':
    case '-':
    case ':':
      return eol + 2;
    case '$': {
      const long long n = std::stoll(b.substr(pos + 1, eol - pos - 1));
      if (n < 0) return eol + 2;
      const std::size_t end = eol + 2 + static_cast<std::size_t>(n) + 2;
      return end <= b.size() ? end : std::string::npos;
    }
    case '*': {
      const long long n = std::stoll(b.substr(pos + 1, eol - pos - 1));
      std::size_t p = eol + 2;
      for (long long i = 0; i < n; ++i) {
        p = value_end(b, p);
        if (p == std::string::npos) return p;
      }
      return p;
    }
  }
  throw std::runtime_error("not a RESP reply: " + b.substr(pos, 40));
}

std::string command(const std::vector<std::string>& args) {
  std::string out = "*" + std::to_string(args.size()) + "\r\n";
  for (const auto& a : args) out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  return out;
}

// The owner secret each token's grant reply carried, as token_of() last saw it. Every
// test starts its own server, whose tokens start again at 1: a new grant's reply
// replaces the entry before a RENEW or RELEASE of that token is sent.
std::map<std::uint64_t, std::string>& secrets() {
  static std::map<std::uint64_t, std::string> by_token;
  return by_token;
}

// The token of a grant reply "*3\r\n:<token>\r\n:<waited_us>\r\n$32\r\n<secret>\r\n"
// (remembering its secret for owner()); 0 for anything else.
std::uint64_t token_of(const std::string& reply) {
  if (!reply.starts_with("*3\r\n:")) return 0;
  const std::uint64_t token = std::stoull(reply.substr(5));
  const auto at = reply.find("$32\r\n");
  if (at != std::string::npos && reply.size() == at + 5 + 32 + 2) {
    secrets()[token] = reply.substr(at + 5, 32);
  }
  return token;
}

// The owner secret of the grant with this token (its holder's, for RENEW and RELEASE).
std::string owner(std::uint64_t token) {
  const auto it = secrets().find(token);
  if (it == secrets().end())
    throw std::runtime_error("no grant reply seen for token " + std::to_string(token));
  return it->second;
}

// INFO's (or /metrics') "name<sep>value" lines.
std::map<std::string, std::string> fields(const std::string& text, char sep) {
  std::map<std::string, std::string> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string line = text.substr(pos, eol - pos);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    pos = eol + 1;
    const auto at = line.find(sep);
    if (!line.starts_with("#") && at != std::string::npos) {
      out[line.substr(0, at)] = line.substr(at + 1);
    }
  }
  return out;
}

const std::string kNil = "$-1\r\n";
const std::string kNoReply = "<no reply>";

// One connection on a blocking socket; every read has a deadline.
class Client {
 public:
  explicit Client(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error("socket() failed");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd_);
      throw std::runtime_error("cannot connect to 127.0.0.1:" + std::to_string(port));
    }
  }
  ~Client() {
    if (fd_ >= 0) ::close(fd_);
  }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  int fd() const { return fd_; }

  // false if the peer is gone.
  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }
  bool send(const std::vector<std::string>& args) { return send(command(args)); }

  // The next reply's exact bytes, or kNoReply after `timeout` or at EOF.
  std::string reply(milliseconds timeout = 5s) {
    const auto deadline = SteadyClock::now() + timeout;
    while (true) {
      const std::size_t end = value_end(in_, 0);
      if (end != std::string::npos) {
        std::string r = in_.substr(0, end);
        in_.erase(0, end);
        return r;
      }
      if (!fill(deadline)) return kNoReply;
    }
  }
  // Sends a request and returns its reply.
  std::string call(const std::vector<std::string>& args, milliseconds timeout = 5s) {
    if (!send(args)) return kNoReply;
    return reply(timeout);
  }
  // true if nothing (not even EOF) arrives within `quiet`.
  bool silent_for(milliseconds quiet) {
    if (!in_.empty()) return false;
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(quiet.count())) == 0;
  }
  // true once the server has closed the connection (replies before that are kept).
  bool closed_by_server(milliseconds timeout = 5s) {
    const auto deadline = SteadyClock::now() + timeout;
    while (!eof_) {
      if (!fill(deadline) && !eof_) return false;
    }
    return true;
  }
  const std::string& unread() const { return in_; }

  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }
  // Closes with a RST rather than a FIN.
  void reset() {
    linger l{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    ::close(fd_);
    fd_ = -1;
  }
  void close() {
    ::close(fd_);
    fd_ = -1;
  }

  // Reads what is there (waiting until `deadline`); false on timeout or EOF.
  bool fill(SteadyClock::time_point deadline) {
    if (eof_) return false;
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - SteadyClock::now());
    pollfd p{fd_, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char buf[16384];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    in_.append(buf, static_cast<std::size_t>(n));
    return true;
  }

 private:
  int fd_ = -1;
  std::string in_;
  bool eof_ = false;
};

// --- helpers around a server

std::map<std::string, std::string> info(std::uint16_t port) {
  Client c(port);
  const std::string reply = c.call({"INFO"});
  const auto header = reply.find("\r\n");
  if (!reply.starts_with("$") || header == std::string::npos) return {};
  return fields(reply.substr(header + 2), ':');
}

// Polls INFO until `field` has `value` (true) or `timeout` passes (false). The INFO
// connection itself counts in "connections".
bool info_reaches(std::uint16_t port, const std::string& field, const std::string& value,
                  milliseconds timeout = 5s) {
  const auto deadline = SteadyClock::now() + timeout;
  while (SteadyClock::now() < deadline) {
    if (info(port)[field] == value) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

std::string inspect(std::uint16_t port, const std::string& key) {
  Client c(port);
  return c.call({"INSPECT", key});
}

std::string bulk(std::string_view s) {
  return "$" + std::to_string(s.size()) + "\r\n" + std::string(s) + "\r\n";
}
// The token of the first holder in an INSPECT reply; 0 if there is none.
std::uint64_t holder_token(const std::string& inspect_reply) {
  const auto holders = inspect_reply.find("holders\r\n*");
  if (holders == std::string::npos || inspect_reply.compare(holders + 9, 2, "*0") == 0) return 0;
  const auto colon = inspect_reply.find("\r\n:", holders);
  return colon == std::string::npos ? 0 : std::stoull(inspect_reply.substr(colon + 3));
}

// The waiters' "ms to deadline" in an INSPECT reply, in queue order.
std::vector<long long> waiter_deadlines(const std::string& inspect_reply) {
  std::vector<long long> out;
  std::size_t pos = inspect_reply.find("waiters\r\n");
  const std::size_t end = inspect_reply.find("delayed_ms");
  if (pos == std::string::npos || end == std::string::npos) return out;
  while ((pos = inspect_reply.find("\r\n:", pos)) < end) {
    pos += 3;
    out.push_back(std::stoll(inspect_reply.substr(pos)));
  }
  return out;
}

const std::string kNothingHere = "*6\r\n" + bulk("holders") + "*0\r\n" + bulk("waiters") +
                                 "*0\r\n" + bulk("delayed_ms") + ":0\r\n";

// Runs wardend until it exits (SIGKILL after `timeout`): its exit status (128 + signal
// when killed) and its output.
std::pair<int, std::string> run_to_exit(const std::vector<std::string>& args, const fs::path& log,
                                        milliseconds timeout = 10s) {
  std::vector<std::string> argv = {wardend_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, cargv[0], &actions, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start wardend");
  const auto deadline = SteadyClock::now() + timeout;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (SteadyClock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(10ms);
  }
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), text};
}

// A thousand sockets need more descriptors than the usual soft limit.
void raise_fd_limit() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);
  }
}

// --- bad input

TEST(WardendTest, MalformedFramesGetAnErrorAndCloseWhileOthersAreServed) {
  Wardend server;
  Client holder(server.port());
  ASSERT_EQ(token_of(holder.call({"ACQUIRE", "t/held", "x", "30000"})), 1u);

  const std::vector<std::pair<std::string, std::string>> cases = {
      {"*abc\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
      {"*1\r\n+PING\r\n", "-ERR Protocol error: expected '$', got '+'\r\n"},
      {"*1\r\n$-1\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
      {"*1\r\n$4\r\nPINGxx\r\n", "-ERR Protocol error: bulk data not ended by CRLF\r\n"},
      {"*2\r\n$4\r\nPING\r\n:1\r\n", "-ERR Protocol error: expected '$', got ':'\r\n"},
      {"*2057\r\n", "-ERR Protocol error: more than 2056 arguments\r\n"},
      {"*99999999999999999999\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
      {std::string("*1\r\n$\xff\r\n", 8), "-ERR Protocol error: invalid bulk length\r\n"},
      // A valid request first is answered; the garbage behind it closes.
      {"PING\r\n*1\r\n$x\r\n", "+PONG\r\n-ERR Protocol error: invalid bulk length\r\n"},
  };
  for (const auto& [bytes, expected] : cases) {
    Client c(server.port());
    ASSERT_TRUE(c.send(bytes));
    EXPECT_TRUE(c.closed_by_server()) << "not closed after " << bytes;
    EXPECT_EQ(c.unread(), expected) << "for " << bytes;
  }
  // Others were served all along and the table is as it was.
  EXPECT_EQ(holder.call({"PING"}), "+PONG\r\n");
  const std::string after = inspect(server.port(), "t/held");
  EXPECT_EQ(holder_token(after), 1u);
  EXPECT_NE(after.find("waiters\r\n*0\r\n"), std::string::npos) << after;
  const auto i = info(server.port());
  EXPECT_EQ(i.at("keys"), "1");
  EXPECT_EQ(i.at("holders"), "1");
  EXPECT_EQ(i.at("waiters"), "0");
}

TEST(WardendTest, InlineGarbageIsAnUnknownCommandAndTheConnectionGoesOn) {
  Wardend server;
  Client c(server.port());
  ASSERT_TRUE(c.send(std::string("\x01\x02 garbage\xff") + " here\r\nPING\r\n"));
  EXPECT_TRUE(c.reply().starts_with("-ERR unknown command '"));
  EXPECT_EQ(c.reply(), "+PONG\r\n");
  EXPECT_EQ(info(server.port()).at("keys"), "0");
}

TEST(WardendTest, OversizedRequestIsRefusedAndClosed) {
  Wardend server({"--max-request-bytes", "1024"});
  Client holder(server.port());
  ASSERT_EQ(token_of(holder.call({"ACQUIRE", "t/held", "x", "30000"})), 1u);
  const std::string too_large = "-ERR Protocol error: request larger than 1024 bytes\r\n";
  {  // A declared length over the limit is refused before its bytes arrive.
    Client c(server.port());
    ASSERT_TRUE(c.send("*4\r\n$7\r\nACQUIRE\r\n$2000\r\n"));
    EXPECT_TRUE(c.closed_by_server());
    EXPECT_EQ(c.unread(), too_large);
  }
  {  // So is an inline line that runs past the limit without ending.
    Client c(server.port());
    ASSERT_TRUE(c.send("PING " + std::string(2000, 'a')));
    EXPECT_TRUE(c.closed_by_server());
    EXPECT_EQ(c.unread(), too_large);
  }
  {  // Just under the limit is fine.
    Client c(server.port());
    const std::string message(900, 'm');
    EXPECT_EQ(c.call({"PING", message}), bulk(message));
  }
  EXPECT_EQ(holder.call({"CHECK", "t/held", "x", "1"}), ":1\r\n");
  EXPECT_EQ(info(server.port()).at("keys"), "1");
}

// --- partial frames

TEST(WardendTest, RequestSentByteByByteIsAnswered) {
  Wardend server;
  Client c(server.port());
  const std::string request = command({"ACQUIRE", "t/slow", "exclusive", "30000"});
  const auto pause = 100ms / request.size();
  for (char byte : request) {
    ASSERT_TRUE(c.send(std::string_view(&byte, 1)));
    std::this_thread::sleep_for(pause);
  }
  EXPECT_EQ(token_of(c.reply()), 1u);
  // Inline, too.
  for (char byte : std::string("CHECK t/slow x 1\r\n")) {
    ASSERT_TRUE(c.send(std::string_view(&byte, 1)));
    std::this_thread::sleep_for(3ms);
  }
  EXPECT_EQ(c.reply(), ":1\r\n");
}

TEST(WardendTest, HalfAFrameThenCloseChangesNothing) {
  Wardend server;
  const std::string request = command({"ACQUIRE", "t/half", "x", "30000"});
  {
    Client c(server.port());
    ASSERT_TRUE(c.send(request.substr(0, request.size() / 2)));
    EXPECT_TRUE(c.silent_for(100ms));
  }
  {
    Client c(server.port());
    ASSERT_TRUE(c.send(request.substr(0, request.size() - 1)));  // all but the last LF
    EXPECT_TRUE(c.silent_for(100ms));
    c.reset();
  }
  EXPECT_TRUE(info_reaches(server.port(), "connections", "1"));
  EXPECT_EQ(inspect(server.port(), "t/half"), kNothingHere);
  EXPECT_EQ(info(server.port()).at("keys"), "0");
  Client c(server.port());
  EXPECT_EQ(token_of(c.call({"ACQUIRE", "t/half", "x", "30000"})), 1u);
}

// --- pipelining

TEST(WardendTest, PipelinedRequestsAreAnsweredInOrder) {
  Wardend server;
  Client c(server.port());
  std::string batch;
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"PING"},
           {"ACQUIRE", "t/p", "x", "30000"},
           {"ACQUIRE", "t/p", "x", "30000"},
           {"CHECK", "t/p", "x", "1"},
       }) {
    batch += command(args);
  }
  ASSERT_TRUE(c.send(batch));
  EXPECT_EQ(c.reply(), "+PONG\r\n");
  const std::string granted = c.reply();
  EXPECT_TRUE(granted.starts_with("*3\r\n:1\r\n:0\r\n$32\r\n")) << granted;
  EXPECT_EQ(token_of(granted), 1u);
  EXPECT_EQ(c.reply(), kNil);
  EXPECT_EQ(c.reply(), ":1\r\n");
  // The second batch carries the secret the grant reply gave.
  batch.clear();
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"RENEW", "t/p", "1", owner(1), "30000"},
           {"RELEASE", "t/p", "1", owner(1)},
           {"RELEASE", "t/p", "1", owner(1)},
           {"PING", "done"},
       }) {
    batch += command(args);
  }
  batch += "PING inline\r\n";
  ASSERT_TRUE(c.send(batch));
  EXPECT_EQ(c.reply(), ":1\r\n");
  EXPECT_EQ(c.reply(), ":1\r\n");
  EXPECT_EQ(c.reply(), ":0\r\n");
  EXPECT_EQ(c.reply(), "$4\r\ndone\r\n");
  EXPECT_EQ(c.reply(), "$6\r\ninline\r\n");
}

TEST(WardendTest, RequestsPipelinedBehindAParkedAcquireAreAnsweredAfterIt) {
  Wardend server;
  Client holder(server.port());
  const std::uint64_t held = token_of(holder.call({"ACQUIRE", "t/q", "x", "30000"}));
  ASSERT_EQ(held, 1u);

  Client waiter(server.port());
  ASSERT_TRUE(waiter.send(command({"ACQUIRE", "t/q", "x", "30000", "WAIT", "10000"}) +
                          command({"PING", "after"}) + command({"CHECK", "t/q", "x", "2"})));
  EXPECT_TRUE(waiter.silent_for(200ms));  // PING waits for the ACQUIRE in front of it
  EXPECT_EQ(holder.call({"RELEASE", "t/q", "1", owner(1)}), ":1\r\n");
  const std::string granted = waiter.reply();
  EXPECT_EQ(token_of(granted), 2u) << granted;
  EXPECT_EQ(waiter.reply(), "$5\r\nafter\r\n");
  EXPECT_EQ(waiter.reply(), ":1\r\n");

  // A wait that runs out is answered nil, then the rest.
  Client late(server.port());
  ASSERT_TRUE(
      late.send(command({"ACQUIRE", "t/q", "x", "30000", "WAIT", "300"}) + command({"PING"})));
  const auto start = SteadyClock::now();
  EXPECT_EQ(late.reply(), kNil);
  EXPECT_GE(SteadyClock::now() - start, 250ms);
  EXPECT_EQ(late.reply(), "+PONG\r\n");
}

TEST(WardendTest, WaiterThatHalfClosesIsAnsweredNilAndLeavesTheQueue) {
  Wardend server;
  Client holder(server.port());
  ASSERT_EQ(token_of(holder.call({"ACQUIRE", "t/k", "x", "30000"})), 1u);
  Client waiter(server.port());
  ASSERT_TRUE(waiter.send({"ACQUIRE", "t/k", "x", "30000", "FOREVER"}));
  ASSERT_TRUE(info_reaches(server.port(), "waiters", "1"));
  waiter.shutdown_write();
  EXPECT_TRUE(waiter.closed_by_server(2s));
  EXPECT_EQ(waiter.unread(), kNil);
  EXPECT_EQ(info(server.port()).at("waiters"), "0");
  EXPECT_EQ(holder.call({"RELEASE", "t/k", "1", owner(1)}), ":1\r\n");
  EXPECT_EQ(info(server.port()).at("keys"), "0");
}

TEST(WardendTest, ParkedConnectionThatKeepsSendingIsServedInOrderAfterTheGrant) {
  Wardend server({"--max-request-bytes", "1024"});
  Client holder(server.port());
  ASSERT_EQ(token_of(holder.call({"ACQUIRE", "t/k", "x", "30000"})), 1u);
  Client waiter(server.port());
  ASSERT_TRUE(waiter.send({"ACQUIRE", "t/k", "x", "30000", "FOREVER"}));
  constexpr int kPings = 20'000;  // ~280 KB: more than the server buffers for a parked client
  std::string pings;
  for (int i = 0; i < kPings; ++i) pings += "PING\r\n";
  std::thread sender([&] { waiter.send(pings); });
  EXPECT_TRUE(waiter.silent_for(300ms));
  EXPECT_EQ(holder.call({"RELEASE", "t/k", "1", owner(1)}), ":1\r\n");
  EXPECT_EQ(token_of(waiter.reply()), 2u);
  int pongs = 0;
  while (pongs < kPings && waiter.reply() == "+PONG\r\n") ++pongs;
  sender.join();
  EXPECT_EQ(pongs, kPings);
}

// --- many connections

TEST(WardendTest, AThousandParkedWaitersAreAllServedAndAClosedWaiterLeavesAtOnce) {
  raise_fd_limit();
  Wardend server;
  const std::uint16_t port = server.port();
  const std::vector<std::string> keys = {"t/a", "t/b", "t/c", "t/d"};
  std::vector<std::unique_ptr<Client>> holders;
  for (const auto& key : keys) {
    holders.push_back(std::make_unique<Client>(port));
    ASSERT_NE(token_of(holders.back()->call({"ACQUIRE", key, "x", "30000"})), 0u);
  }

  constexpr int kWaiters = 1000;
  std::vector<std::unique_ptr<Client>> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.push_back(std::make_unique<Client>(port));
    ASSERT_TRUE(
        waiters.back()->send({"ACQUIRE", keys[i % keys.size()], "x", "30000", "WAIT", "60000"}));
  }
  ASSERT_TRUE(info_reaches(port, "waiters", std::to_string(kWaiters), 20s))
      << info(port)["waiters"];

  {  // Meanwhile, on a key of its own: the head waiter's connection closes.
    Client solo(port);
    ASSERT_NE(token_of(solo.call({"ACQUIRE", "t/solo", "x", "30000"})), 0u);
    Client first(port), second(port), third(port);
    ASSERT_TRUE(first.send({"ACQUIRE", "t/solo", "x", "30000", "FOREVER"}));
    ASSERT_TRUE(info_reaches(port, "waiters", std::to_string(kWaiters + 1)));
    ASSERT_TRUE(second.send({"ACQUIRE", "t/solo", "x", "30000", "WAIT", "20000"}));
    ASSERT_TRUE(info_reaches(port, "waiters", std::to_string(kWaiters + 2)));
    ASSERT_TRUE(third.send({"ACQUIRE", "t/solo", "x", "30000", "WAIT", "40000"}));
    ASSERT_TRUE(info_reaches(port, "waiters", std::to_string(kWaiters + 3)));
    first.close();
    ASSERT_TRUE(info_reaches(port, "waiters", std::to_string(kWaiters + 2), 1s));
    // INSPECT: the waiter that waits 20 s is now at the head, the 40 s one behind it.
    const std::string view = inspect(port, "t/solo");
    const auto deadlines = waiter_deadlines(view);
    ASSERT_EQ(deadlines.size(), 2u) << view;
    EXPECT_TRUE(deadlines[0] > 10'000 && deadlines[0] <= 20'000) << view;
    EXPECT_TRUE(deadlines[1] > 30'000 && deadlines[1] <= 40'000) << view;
    // The holder lets go: the second gets it, not the closed first.
    const std::uint64_t solo_token = holder_token(view);
    EXPECT_EQ(solo.call({"RELEASE", "t/solo", std::to_string(solo_token), owner(solo_token)}),
              ":1\r\n");
    EXPECT_NE(token_of(second.reply()), 0u);
    EXPECT_TRUE(third.silent_for(50ms));
  }

  // The holders let go; each waiter releases as soon as it is granted.
  for (std::size_t k = 0; k < keys.size(); ++k) {
    const std::uint64_t token = holder_token(inspect(port, keys[k]));
    EXPECT_EQ(holders[k]->call({"RELEASE", keys[k], std::to_string(token), owner(token)}),
              ":1\r\n");
  }
  std::vector<int> grants(kWaiters, 0);
  std::map<std::string, std::uint64_t> last_token;
  int granted = 0, released = 0;
  const auto deadline = SteadyClock::now() + 30s;
  std::vector<pollfd> fds(kWaiters);
  while (released < kWaiters && SteadyClock::now() < deadline) {
    for (int i = 0; i < kWaiters; ++i) fds[i] = pollfd{waiters[i]->fd(), POLLIN, 0};
    if (::poll(fds.data(), fds.size(), 1000) <= 0) continue;
    for (int i = 0; i < kWaiters; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Client& w = *waiters[i];
      if (!w.fill(SteadyClock::now() + 1s)) continue;
      while (true) {
        const std::string r = w.reply(0ms);
        if (r == kNoReply) break;
        const std::string& key = keys[static_cast<std::size_t>(i) % keys.size()];
        if (const std::uint64_t token = token_of(r); token != 0) {
          ++grants[i];
          ++granted;
          EXPECT_GT(token, last_token[key]) << "tokens of one key increase";
          last_token[key] = token;
          w.send({"RELEASE", key, std::to_string(token), owner(token)});
        } else {
          EXPECT_EQ(r, ":1\r\n") << "waiter " << i;
          ++released;
        }
      }
    }
  }
  EXPECT_EQ(granted, kWaiters);
  EXPECT_EQ(released, kWaiters);
  for (int i = 0; i < kWaiters; ++i) ASSERT_EQ(grants[i], 1) << "waiter " << i;
  const auto end = info(port);
  EXPECT_EQ(end.at("waiters"), "0");
  EXPECT_EQ(end.at("holders"), "1");  // t/solo's second waiter: a grant outlives its connection
}

// --- owner secrets: a stranger cannot renew or release another's grant

TEST(WardendTest, StrangerCannotRenewOrReleaseAGrantWhateverTokenAndSecretItTries) {
  Wardend server;
  Client holder(server.port());
  // Other grants around the victim's token, so the stranger's guesses hit real tokens:
  // 300 released ones before it, a shared holder beside it, and the stranger's own.
  for (int i = 0; i < 300; ++i) {
    const std::uint64_t t = token_of(holder.call({"ACQUIRE", "t/burn", "x", "30000"}));
    ASSERT_EQ(holder.call({"RELEASE", "t/burn", std::to_string(t), owner(t)}), ":1\r\n");
  }
  const std::uint64_t victim = token_of(holder.call({"ACQUIRE", "t/v", "s", "30000"}));
  ASSERT_NE(victim, 0u);
  const std::string right = owner(victim);
  const std::uint64_t neighbour = token_of(holder.call({"ACQUIRE", "t/v", "s", "30000"}));
  Client stranger(server.port());
  const std::uint64_t own = token_of(stranger.call({"ACQUIRE", "t/own", "x", "30000"}));
  ASSERT_NE(own, 0u);

  // Every token within 1000 of the victim's, with a guessed secret and with the
  // stranger's own (a real secret, of another grant); then the victim's token with
  // wrong secrets: all zeros, its own grant's, and the right one with each character
  // changed. Pipelined, answered in order.
  std::vector<std::string> secrets_tried = {std::string(32, '0'), owner(own)};
  std::string batch;
  std::size_t sent = 0;
  const auto send_both = [&](std::uint64_t token, const std::string& secret) {
    batch += command({"RENEW", "t/v", std::to_string(token), secret, "600000"});
    batch += command({"RELEASE", "t/v", std::to_string(token), secret});
    sent += 2;
  };
  for (std::uint64_t t = victim > 1000 ? victim - 1000 : 1; t <= victim + 1000; ++t) {
    for (const auto& secret : secrets_tried) send_both(t, secret);
  }
  for (std::size_t i = 0; i < right.size(); ++i) {
    std::string wrong = right;
    wrong[i] = wrong[i] == 'a' ? 'b' : 'a';
    send_both(victim, wrong);
  }
  ASSERT_TRUE(stranger.send(batch));
  for (std::size_t i = 0; i < sent; ++i) {
    ASSERT_EQ(stranger.reply(5s), ":0\r\n") << "reply " << i;
  }

  // The grant survives, unrenewed; so does its neighbour; nobody else gets it exclusive.
  Client third(server.port());
  EXPECT_EQ(third.call({"CHECK", "t/v", "shared", std::to_string(victim)}), ":1\r\n");
  EXPECT_EQ(third.call({"CHECK", "t/v", "shared", std::to_string(neighbour)}), ":1\r\n");
  EXPECT_EQ(third.call({"ACQUIRE", "t/v", "x", "30000"}), kNil);
  const std::string view = inspect(server.port(), "t/v");
  EXPECT_EQ(view.find("60000"), std::string::npos) << "renewed by a stranger: " << view;
  EXPECT_EQ(view.find(right), std::string::npos) << "INSPECT shows the secret: " << view;
  // The holder's own secret works, from any connection.
  EXPECT_EQ(third.call({"RENEW", "t/v", std::to_string(victim), right, "30000"}), ":1\r\n");
  EXPECT_EQ(third.call({"RELEASE", "t/v", std::to_string(victim), right}), ":1\r\n");
  EXPECT_EQ(third.call({"CHECK", "t/v", "shared", std::to_string(victim)}), ":0\r\n");
}

// --- access and limits

TEST(WardendTest, RequirepassAsksForAuthFirst) {
  Wardend server({"--requirepass", "s3cret"});
  TextClient redis(server.port());
  EXPECT_EQ(redis({"PING"}), "-NOAUTH authentication required");
  EXPECT_EQ(redis({"ACQUIRE", "t/k", "x", "30000"}), "-NOAUTH authentication required");
  EXPECT_EQ(redis({"AUTH", "guess"}), "-WRONGPASS invalid password");
  EXPECT_EQ(redis({"PING"}), "-NOAUTH authentication required");
  EXPECT_EQ(redis({"AUTH", "s3cret"}), "+OK");
  EXPECT_EQ(redis({"PING"}), "+PONG");
  const std::string acquired = redis({"ACQUIRE", "t/k", "x", "30000"});
  ASSERT_TRUE(acquired.starts_with("[:1, :0, $")) << acquired;  // [token, waited_us, secret]
  const std::string secret = acquired.substr(10, 32);
  TextClient other(server.port());
  EXPECT_EQ(other({"INSPECT", "t/k"}), "-NOAUTH authentication required");
  EXPECT_EQ(other({"AUTH", "default", "s3cret"}), "+OK");
  EXPECT_EQ(other({"RELEASE", "t/k", "1", secret}), ":1");
}

TEST(WardendTest, ConnectionOverTheLimitGetsLimitAndIsClosed) {
  Wardend server({"--max-connections", "5"});
  // The start-up probe's connection may still be counted for a moment.
  ASSERT_TRUE(info_reaches(server.port(), "connections", "1"));
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 5; ++i) {
    // A connection closed just before (INFO's) may not have been noticed yet: retry.
    std::string answer;
    for (int attempt = 0; attempt < 100 && answer != "+PONG\r\n"; ++attempt) {
      if (attempt > 0) std::this_thread::sleep_for(20ms);
      clients.push_back(std::make_unique<Client>(server.port()));
      answer = clients.back()->call({"PING"});
      if (answer != "+PONG\r\n") clients.pop_back();
    }
    ASSERT_EQ(answer, "+PONG\r\n") << i;
  }
  Client sixth(server.port());
  EXPECT_TRUE(sixth.closed_by_server());
  EXPECT_EQ(sixth.unread(), "-LIMIT too many connections\r\n");
  EXPECT_EQ(token_of(clients[0]->call({"ACQUIRE", "t/k", "x", "30000"})), 1u);

  clients[4]->close();
  const auto deadline = SteadyClock::now() + 5s;
  std::string answer;
  while (SteadyClock::now() < deadline) {  // the server notices the close soon
    Client again(server.port());
    answer = again.call({"PING"}, 1s);
    if (answer == "+PONG\r\n") break;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(answer, "+PONG\r\n");
}

// --- clients that say nothing, vanish, or do not read

TEST(WardendTest, AConnectionThatDoesNotAuthenticateIsClosedAtItsDeadline) {
  Wardend server({"--requirepass", "s3cret", "--auth-timeout", "300"});
  Client silent(server.port());
  Client authed(server.port());
  ASSERT_EQ(authed.call({"AUTH", "s3cret"}), "+OK\r\n");
  ASSERT_TRUE(silent.closed_by_server(5s)) << "a silent connection kept its slot";
  EXPECT_EQ(silent.unread(), "-NOAUTH no AUTH within 300 ms; closing\r\n");
  std::this_thread::sleep_for(500ms);  // past the deadline: the authenticated one stays
  EXPECT_EQ(authed.call({"PING"}), "+PONG\r\n");
}

TEST(WardendTest, AnIdleConnectionIsClosedButAWaitingOneIsNot) {
  Wardend server({"--idle-timeout", "1"});
  Client idle(server.port());
  Client holder(server.port());
  Client waiter(server.port());
  const std::uint64_t held = token_of(holder.call({"ACQUIRE", "t/k", "x", "30000"}));
  ASSERT_EQ(held, 1u);
  ASSERT_TRUE(waiter.send({"ACQUIRE", "t/k", "x", "30000", "FOREVER"}));
  // Twice the idle timeout: the holder stays by pinging, the waiter by waiting.
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(holder.call({"PING"}), "+PONG\r\n") << "the holder was closed though it pinged";
    std::this_thread::sleep_for(250ms);
  }
  EXPECT_TRUE(idle.closed_by_server(5s)) << "an idle connection was kept";
  EXPECT_EQ(idle.unread(), "");
  ASSERT_EQ(holder.call({"RELEASE", "t/k", "1", owner(held)}), ":1\r\n");
  EXPECT_EQ(token_of(waiter.reply()), 2u) << "the waiting connection was closed while it waited";
}

// A revoke listener that stops reading: every REVOKE pushed to it is output pending at
// wardend. Past --max-output-bytes the connection is closed, not grown without bound.
TEST(WardendTest, AListenerThatDoesNotReadIsClosedPastTheOutputLimit) {
  Wardend server({"--max-output-bytes", "65536"});
  Client listener(server.port());
  const std::string id = listener.call({"REVOKES"});
  ASSERT_TRUE(id.starts_with(":")) << id;
  const std::string listener_id = id.substr(1, id.size() - 3);
  Client holder(server.port());
  Client contender(server.port());
  // Each revoke pushes about 520 bytes; 16,000 of them are more than the loopback
  // socket's buffers take (a few MiB), so most of them wait at wardend.
  const std::string long_name(500, 'n');
  constexpr int kKeys = 16'000;
  constexpr int kBatch = 1'000;
  bool closed = false;
  for (int from = 0; from < kKeys && !closed; from += kBatch) {
    std::string cache;
    std::string tries;
    for (int i = from; i < from + kBatch; ++i) {
      const std::string key = "t/" + std::to_string(i) + long_name;
      cache += command({"ACQUIRE", key, "x", "30000", "CACHE", listener_id});
      tries += command({"ACQUIRE", key, "x", "30000"});
    }
    ASSERT_TRUE(holder.send(cache));
    for (int i = 0; i < kBatch; ++i) ASSERT_GT(token_of(holder.reply()), 0u) << from + i;
    ASSERT_TRUE(contender.send(tries));
    for (int i = 0; i < kBatch; ++i) ASSERT_EQ(contender.reply(), kNil) << from + i;
    closed = info(server.port())["connections"] == "3";  // INFO's own connection counts
  }
  EXPECT_TRUE(listener.closed_by_server(10s)) << "the listener that does not read was kept";
  EXPECT_EQ(holder.call({"PING"}), "+PONG\r\n") << "the others are served as before";
}

// --- metrics

TEST(WardendTest, MetricsEndpointServesPrometheusTextMatchingTheState) {
  const std::uint16_t metrics_port = free_port();
  Wardend server({"--metrics-listen", "127.0.0.1:" + std::to_string(metrics_port)});
  ASSERT_TRUE(server.process().wait_for_log("metrics on", 5s));
  ASSERT_TRUE(info_reaches(server.port(), "connections", "1"));

  Client holder(server.port());
  ASSERT_EQ(token_of(holder.call({"ACQUIRE", "t/a", "s", "30000"})), 1u);
  ASSERT_EQ(token_of(holder.call({"ACQUIRE", "t/a", "s", "30000"})), 2u);
  ASSERT_EQ(token_of(holder.call({"ACQUIRE", "t/b", "x", "30000"})), 3u);
  Client waiter(server.port());
  ASSERT_TRUE(waiter.send({"ACQUIRE", "t/b", "x", "30000", "FOREVER"}));
  ASSERT_TRUE(info_reaches(server.port(), "waiters", "1"));

  httplib::Client http("127.0.0.1", metrics_port);
  http.set_connection_timeout(5s);
  http.set_read_timeout(5s);
  std::map<std::string, std::string> m;
  for (int attempt = 0; attempt < 100; ++attempt) {  // the INFO client may linger a moment
    const auto res = http.Get("/metrics");
    ASSERT_TRUE(res) << "GET /metrics failed";
    EXPECT_EQ(res->status, 200);
    EXPECT_TRUE(res->get_header_value("Content-Type").starts_with("text/plain"));
    EXPECT_NE(res->body.find("# TYPE wardend_held_grants gauge"), std::string::npos);
    m = fields(res->body, ' ');
    if (m["wardend_connections"] == "2") break;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(m["wardend_connections"], "2");
  EXPECT_EQ(m["wardend_keys"], "2");
  EXPECT_EQ(m["wardend_held_grants"], "3");
  EXPECT_EQ(m["wardend_waiters"], "1");
  EXPECT_EQ(m["wardend_grants_total"], "3");

  EXPECT_EQ(holder.call({"RELEASE", "t/b", "3", owner(3)}), ":1\r\n");
  EXPECT_EQ(token_of(waiter.reply()), 4u);
  m = fields(http.Get("/metrics")->body, ' ');
  EXPECT_EQ(m["wardend_held_grants"], "3");
  EXPECT_EQ(m["wardend_waiters"], "0");
  EXPECT_EQ(m["wardend_grants_total"], "4");
  EXPECT_EQ(http.Get("/nothing")->status, 404);
}

TEST(WardendTest, LeaseOfAWaiterGrantedWhenAnotherResetsItsConnectionExpiresOnTime) {
  // A writer at the head of the queue resets its connection; the reader behind it is
  // granted with a short lease, which must expire on time with no other traffic.
  const std::uint16_t metrics_port = free_port();
  Wardend server({"--metrics-listen", "127.0.0.1:" + std::to_string(metrics_port)});
  ASSERT_TRUE(server.process().wait_for_log("metrics on", 5s));
  Client reader(server.port());
  ASSERT_EQ(token_of(reader.call({"ACQUIRE", "t/k", "s", "30000"})), 1u);
  Client writer(server.port());
  ASSERT_TRUE(writer.send({"ACQUIRE", "t/k", "x", "30000", "FOREVER"}));
  ASSERT_TRUE(info_reaches(server.port(), "waiters", "1"));
  Client short_reader(server.port());
  ASSERT_TRUE(short_reader.send({"ACQUIRE", "t/k", "s", "200", "FOREVER"}));
  ASSERT_TRUE(info_reaches(server.port(), "waiters", "2"));
  writer.reset();
  EXPECT_EQ(token_of(short_reader.reply()), 2u);
  std::this_thread::sleep_for(600ms);
  // /metrics reads the state without applying time: only the timer expires the lease.
  httplib::Client http("127.0.0.1", metrics_port);
  http.set_read_timeout(5s);
  const auto res = http.Get("/metrics");
  ASSERT_TRUE(res);
  const auto m = fields(res->body, ' ');
  EXPECT_EQ(m.at("wardend_held_grants"), "1");
  EXPECT_EQ(m.at("wardend_lease_expirations_total"), "1");
}

// --- shutdown

TEST(WardendTest, SigtermStopsPromptlyAndClosesConnections) {
  Wardend server;
  Client holder(server.port());
  ASSERT_EQ(token_of(holder.call({"ACQUIRE", "t/k", "x", "30000"})), 1u);
  Client waiter(server.port());
  ASSERT_TRUE(waiter.send({"ACQUIRE", "t/k", "x", "30000", "FOREVER"}));
  ASSERT_TRUE(info_reaches(server.port(), "waiters", "1"));

  const auto start = SteadyClock::now();
  EXPECT_EQ(server.process().stop(SIGTERM, 10s), 0);
  EXPECT_LT(SteadyClock::now() - start, 3s);
  EXPECT_NE(server.process().log_text().find("wardend stopped"), std::string::npos)
      << server.process().log_text();
  EXPECT_TRUE(holder.closed_by_server(2s));
  EXPECT_TRUE(waiter.closed_by_server(2s));
}

// --- durability

// Acquires on a fresh connection until granted; the time of the grant's reply.
SteadyClock::time_point acquire_when_allowed(std::uint16_t port, const std::string& key,
                                             std::uint64_t& token, milliseconds timeout = 10s) {
  const auto deadline = SteadyClock::now() + timeout;
  Client c(port);
  while (SteadyClock::now() < deadline) {
    const std::string r = c.call({"ACQUIRE", key, "x", "300"});
    if ((token = token_of(r)) != 0) return SteadyClock::now();
    EXPECT_TRUE(r.starts_with("-STARTING restarted recently; no grants for another ")) << r;
    std::this_thread::sleep_for(10ms);
  }
  ADD_FAILURE() << "no grant within " << timeout.count() << " ms";
  return SteadyClock::now();
}

TEST(WardendDurabilityTest, TokensNeverGoBackAcrossKillNine) {
  Wardend server;
  std::uint64_t highest = 0;
  {
    // Past one reserved block of tokens (10,000) and into the next: the crash comes
    // mid-block.
    Client c(server.port());
    for (int batch = 0; batch < 11; ++batch) {
      std::string requests;
      for (int i = 0; i < 1000; ++i) {
        requests += command({"ACQUIRE", "blk/" + std::to_string(batch * 1000 + i), "x", "300"});
      }
      ASSERT_TRUE(c.send(requests));
      for (int i = 0; i < 1000; ++i) {
        const std::uint64_t token = token_of(c.reply());
        ASSERT_GT(token, highest);
        highest = token;
      }
    }
    // Held and queued when the crash comes.
    const std::uint64_t held = token_of(c.call({"ACQUIRE", "t/held", "x", "500"}));
    ASSERT_GT(held, highest);
    highest = held;
    Client waiter(server.port());
    ASSERT_TRUE(waiter.send({"ACQUIRE", "t/held", "x", "500", "FOREVER"}));
    ASSERT_TRUE(info_reaches(server.port(), "waiters", "1"));
    server.process().kill9();
  }
  ASSERT_GT(highest, 10'000u);

  // Several crashes in a row: right after restarting (during the embargo), and after
  // each first grant.
  for (int crash = 0; crash < 4; ++crash) {
    if (crash > 0) server.process().kill9();
    server.start();
    if (crash == 1) continue;  // crash again while still refusing grants
    std::uint64_t token = 0;
    acquire_when_allowed(server.port(), "after/" + std::to_string(crash), token);
    EXPECT_GT(token, highest) << "after crash " << crash;
    highest = std::max(highest, token);
  }
}

TEST(WardendDurabilityTest, NoGrantWhileALeaseFromBeforeTheCrashMayBeAlive) {
  Wardend server;
  {
    Client c(server.port());
    // The longest hold ever granted: a 500 ms lease + 1500 ms lock-delay (long enough
    // for the restarted server to be reached within it, even on a loaded machine).
    ASSERT_EQ(token_of(c.call({"ACQUIRE", "t/long", "x", "500", "DELAY", "1500"})), 1u);
    ASSERT_EQ(token_of(c.call({"ACQUIRE", "t/short", "x", "100"})), 2u);
    ASSERT_EQ(c.call({"RENEW", "t/long", "1", owner(1), "500"}), ":1\r\n");
  }
  server.process().kill9();
  const auto restart = SteadyClock::now();
  server.start();
  {
    Client c(server.port());
    const std::string first = c.call({"ACQUIRE", "t/other", "x", "300"});
    EXPECT_TRUE(first.starts_with("-STARTING restarted recently; no grants for another ")) << first;
    const auto left = std::stoll(first.substr(first.find("another ") + 8));
    EXPECT_GT(left, 0);
    EXPECT_LE(left, 2000);
    // A waiting request is refused too, not parked.
    EXPECT_TRUE(
        c.call({"ACQUIRE", "t/other", "x", "300", "WAIT", "5000"}).starts_with("-STARTING"));
    EXPECT_EQ(c.call({"PING"}), "+PONG\r\n");                           // the rest works
    EXPECT_EQ(c.call({"RELEASE", "t/long", "1", owner(1)}), ":0\r\n");  // nothing from before
  }
  std::uint64_t token = 0;
  const auto granted = acquire_when_allowed(server.port(), "t/long", token);
  EXPECT_GE(granted - restart, 2000ms);
  EXPECT_LT(granted - restart, 8000ms);
  EXPECT_GT(token, 2u);
}

TEST(WardendDurabilityTest, DamagedStateFileIsRefusedWithAClearMessage) {
  Wardend server;
  {
    Client c(server.port());
    ASSERT_EQ(token_of(c.call({"ACQUIRE", "t/k", "x", "300"})), 1u);
  }
  server.process().kill9();
  const fs::path state = server.data_dir() / "state";
  std::string bytes;
  {
    std::ifstream in(state, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_EQ(bytes.size(), 36u);
  std::string damaged = bytes;
  damaged[17] = static_cast<char>(damaged[17] ^ 0x04);  // inside the token reservation
  std::ofstream(state, std::ios::binary | std::ios::trunc) << damaged;

  const fs::path log = server.data_dir().parent_path() / "damaged.log";
  const std::vector<std::string> args = {"--listen", "127.0.0.1:" + std::to_string(free_port()),
                                         "--data-dir", server.data_dir().string()};
  auto [status, output] = run_to_exit(args, log);
  EXPECT_NE(status, 0);
  EXPECT_LT(status, 128) << "it must exit, not be killed";
  EXPECT_NE(output.find(state.string()), std::string::npos) << output;
  EXPECT_NE(output.find("damaged"), std::string::npos) << output;
  EXPECT_EQ(output.find("listening on"), std::string::npos) << output;

  // --reset-state does not override a damaged file either.
  auto with_reset = args;
  with_reset.push_back("--reset-state");
  auto [status2, output2] = run_to_exit(with_reset, log);
  EXPECT_NE(status2, 0);
  EXPECT_NE(output2.find("damaged"), std::string::npos) << output2;

  // Put back as it was, it starts, and tokens go on from the reservation.
  std::ofstream(state, std::ios::binary | std::ios::trunc) << bytes;
  server.start();
  std::uint64_t token = 0;
  acquire_when_allowed(server.port(), "t/k", token);
  EXPECT_GT(token, 1u);
}

TEST(WardendDurabilityTest, LostStateIsRefusedAndResetStateIsDocumentedAsDangerous) {
  TempDir dir("wardend-lost");
  const fs::path data = dir.path() / "data";
  fs::create_directories(data);
  std::ofstream(data / "notes.txt") << "the state file was deleted by mistake\n";
  const std::vector<std::string> args = {"--listen", "127.0.0.1:" + std::to_string(free_port()),
                                         "--data-dir", data.string()};
  auto [status, output] = run_to_exit(args, dir.path() / "lost.log");
  EXPECT_EQ(status, 1);
  EXPECT_NE(output.find("no 'state' file"), std::string::npos) << output;
  EXPECT_NE(output.find("--reset-state (dangerous)"), std::string::npos) << output;

  auto [help_status, help] = run_to_exit({"--help"}, dir.path() / "help.log");
  EXPECT_EQ(help_status, 0);
  const auto at = help.find("--reset-state");
  ASSERT_NE(at, std::string::npos) << help;
  EXPECT_NE(help.find("dangerous", at), std::string::npos) << help;
  EXPECT_NE(help.find("fencing tokens may go backwards", at), std::string::npos) << help;
}

}  // namespace
}  // namespace warden::testing

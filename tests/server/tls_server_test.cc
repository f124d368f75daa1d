// tests/server/tls_server_test.cc — wardend's TLS listener, driven by a blocking OpenSSL
// client (support/tls_probe.h) and from the outside by `openssl s_client`, with
// certificates the openssl CLI made (support/test_certs.h): TLS and mutual TLS that
// work, every certificate that must be refused, both wrong-protocol cases, files that
// keep the server from starting, and the plain and TLS listeners sharing one lock table.
//
// "Fails fast" is checked by cause, never by clock: the client waits far longer than
// the server's handshake timeout would take to close it where that matters, so only the
// server's own immediate refusal can end the conversation first.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "support/server_process.h"
#include "support/test_certs.h"
#include "support/tls_probe.h"
#include "support/tls_wardend.h"

namespace warden::testing {
namespace {

using namespace std::chrono_literals;

const std::string kPing = resp_command({"PING"});

TlsProbeOptions verified() {
  TlsProbeOptions o;
  o.ca = TestCerts::shared().ca().cert;
  return o;
}

TlsProbeOptions with_client(const CertPair& client) {
  TlsProbeOptions o = verified();
  o.client = client;
  return o;
}

// A blocking plain-text connection with `timeout` on every send and receive.
class PlainClient {
 public:
  explicit PlainClient(std::uint16_t port, std::chrono::seconds timeout = 20s) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{static_cast<time_t>(timeout.count()), 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      throw std::runtime_error("cannot connect to port " + std::to_string(port));
    }
  }
  ~PlainClient() { ::close(fd_); }
  PlainClient(const PlainClient&) = delete;
  PlainClient& operator=(const PlainClient&) = delete;

  void send(std::string_view bytes) {
    ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  // Everything the server sends until it closes; "timed out" if it goes quiet instead.
  std::string read_to_close() {
    std::string all;
    char chunk[4096];
    for (;;) {
      const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n == 0) return all;
      if (n < 0) return errno == ECONNRESET ? all : all + "timed out";
      all.append(chunk, static_cast<std::size_t>(n));
    }
  }
  // One read's worth: enough for a short reply on loopback.
  std::string read_some() {
    char chunk[4096];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    return n > 0 ? std::string(chunk, static_cast<std::size_t>(n)) : "";
  }

 private:
  int fd_ = -1;
};

// Runs `command` through the shell (bounded by `timeout 60`); its exit status and
// everything it printed.
std::pair<int, std::string> shell(const std::string& command) {
  std::FILE* pipe = ::popen(("timeout 60 " + command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed");
  std::string out;
  char chunk[4096];
  while (const std::size_t n = std::fread(chunk, 1, sizeof chunk, pipe)) out.append(chunk, n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string single_quoted(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

// `openssl s_client` sends PING and QUIT; what it printed.
std::pair<int, std::string> s_client(std::uint16_t port, const std::string& extra) {
  return shell("sh -c \"printf 'PING\\r\\nQUIT\\r\\n' | openssl s_client -connect 127.0.0.1:" +
               std::to_string(port) + " -CAfile " + single_quoted(TestCerts::shared().ca().cert) +
               " -verify_return_error -verify_hostname localhost -quiet " + extra + "\"");
}

// --- TLS and mutual TLS that work

TEST(WardendTlsTest, PingHelloAndAcquireWorkOverTls) {
  TlsWardend w(false);
  TlsProbe probe(w.tls_port, verified());
  ASSERT_TRUE(probe.handshake_ok()) << probe.error();
  EXPECT_EQ(probe.call(kPing), "+PONG\r\n");
  EXPECT_TRUE(probe.call(resp_command({"HELLO"})).starts_with("*")) << probe.error();
  const std::string grant = probe.call(resp_command({"ACQUIRE", "g/tls", "exclusive", "30000"}));
  EXPECT_TRUE(grant.starts_with("*3\r\n:1\r\n")) << grant << probe.error();
  EXPECT_NE(w.log().find("(mTLS: no)"), std::string::npos) << w.log();
}

TEST(WardendTlsTest, TheCertificateAlsoVerifiesForTheIpAddress) {
  TlsWardend w(false);
  TlsProbeOptions o = verified();
  o.host = "127.0.0.1";
  TlsProbe probe(w.tls_port, o);
  ASSERT_TRUE(probe.handshake_ok()) << probe.error();
  EXPECT_EQ(probe.call(kPing), "+PONG\r\n");
}

TEST(WardendTlsTest, MutualTlsAdmitsAClientCertificateTheCaSigned) {
  TlsWardend w(true);
  TlsProbe probe(w.tls_port, with_client(TestCerts::shared().client()));
  ASSERT_TRUE(probe.handshake_ok()) << probe.error();
  EXPECT_EQ(probe.call(kPing), "+PONG\r\n") << probe.error();
  EXPECT_NE(w.log().find("(mTLS: yes)"), std::string::npos) << w.log();
}

TEST(WardendTlsTest, OpensslSClientGetsPongWithAndWithoutMutualTls) {
  TlsWardend plain_tls(false);
  const auto [status, out] = s_client(plain_tls.tls_port, "");
  EXPECT_NE(out.find("+PONG"), std::string::npos) << status << ": " << out;

  TlsWardend mutual(true);
  const CertPair& client = TestCerts::shared().client();
  const auto [mstatus, mout] = s_client(mutual.tls_port, "-cert " + single_quoted(client.cert) +
                                                             " -key " + single_quoted(client.key));
  EXPECT_NE(mout.find("+PONG"), std::string::npos) << mstatus << ": " << mout;
}

// --- certificates that must be refused

TEST(WardendTlsTest, MutualTlsRefusesAClientWithoutACertificate) {
  TlsWardend w(true);
  TlsProbe probe(w.tls_port, verified());
  // Under TLS 1.3 the refusal arrives after the client's side of the handshake.
  EXPECT_EQ(probe.call(kPing), "");
  EXPECT_FALSE(probe.error().empty());
  EXPECT_EQ(probe.error().find("timed out"), std::string::npos) << probe.error();
  ASSERT_TRUE(w.server.process().wait_for_log("TLS handshake with 127.0.0.1:", 10s)) << w.log();
  EXPECT_NE(w.log().find("peer did not return a certificate"), std::string::npos) << w.log();

  const auto [status, out] = s_client(w.tls_port, "");
  EXPECT_EQ(out.find("+PONG"), std::string::npos) << out;
}

TEST(WardendTlsTest, MutualTlsRefusesAClientCertificateFromAnotherCa) {
  TlsWardend w(true);
  TlsProbe probe(w.tls_port, with_client(TestCerts::shared().stranger()));
  EXPECT_EQ(probe.call(kPing), "");
  EXPECT_FALSE(probe.error().empty());
  EXPECT_EQ(probe.error().find("timed out"), std::string::npos) << probe.error();
  ASSERT_TRUE(w.server.process().wait_for_log("TLS handshake with 127.0.0.1:", 10s)) << w.log();
  EXPECT_NE(w.log().find("certificate verify failed"), std::string::npos) << w.log();

  const CertPair& stranger = TestCerts::shared().stranger();
  const auto [status, out] = s_client(
      w.tls_port, "-cert " + single_quoted(stranger.cert) + " -key " + single_quoted(stranger.key));
  EXPECT_EQ(out.find("+PONG"), std::string::npos) << out;
}

TEST(WardendTlsTest, AClientThatTrustsAnotherCaRefusesTheServer) {
  TlsWardend w(false);
  TlsProbeOptions o;
  o.ca = TestCerts::shared().wrong_ca().cert;
  TlsProbe probe(w.tls_port, o);
  EXPECT_FALSE(probe.handshake_ok());
  EXPECT_NE(probe.error().find("certificate verify failed"), std::string::npos) << probe.error();
  // The server goes on serving others.
  TlsProbe good(w.tls_port, verified());
  EXPECT_EQ(good.call(kPing), "+PONG\r\n") << good.error();
}

// --- the wrong protocol on either port

TEST(WardendTlsTest, PlainRespOnTheTlsPortIsClosedWithAHandshakeError) {
  // A handshake timeout far beyond the client's: only the immediate refusal can close it.
  TlsWardend w(false, {"--tls-handshake-timeout", "600000"});
  PlainClient plain(w.tls_port);
  plain.send(kPing);
  const std::string got = plain.read_to_close();
  EXPECT_EQ(got.find("timed out"), std::string::npos) << got;
  EXPECT_EQ(got.find("PONG"), std::string::npos) << got;
  ASSERT_TRUE(w.server.process().wait_for_log("TLS handshake with 127.0.0.1:", 10s)) << w.log();
  // Others are served meanwhile.
  TlsProbe good(w.tls_port, verified());
  EXPECT_EQ(good.call(kPing), "+PONG\r\n") << good.error();
}

TEST(WardendTlsTest, ATlsClientOnThePlainPortFailsItsHandshakeAtOnce) {
  TlsWardend w(false);
  TlsProbe probe(w.server.port(), verified());
  EXPECT_FALSE(probe.handshake_ok());
  EXPECT_FALSE(probe.error().empty());
  EXPECT_EQ(probe.error().find("timed out"), std::string::npos) << probe.error();

  // A hello without any LF in it: no inline request can end, yet the server answers.
  PlainClient raw(w.server.port());
  raw.send(std::string("\x16\x03\x01\x00\x05\x01\x00\x00\x01\x00", 10));
  EXPECT_EQ(raw.read_to_close(), "-ERR Protocol error: TLS handshake on a plain-text port\r\n");
  PlainClient plain(w.server.port());
  plain.send(kPing);
  EXPECT_EQ(plain.read_some(), "+PONG\r\n");
}

TEST(WardendTlsTest, AClientThatNeverHandshakesIsClosedAfterTheHandshakeTimeout) {
  TlsWardend w(false, {"--tls-handshake-timeout", "300"});
  PlainClient silent(w.tls_port);
  EXPECT_EQ(silent.read_to_close(), "");
  ASSERT_TRUE(w.server.process().wait_for_log("no handshake within 300 ms", 10s)) << w.log();
}

// --- one lock table, two listeners, one connection limit

TEST(WardendTlsTest, ALockHeldOverTlsBlocksAPlainTry) {
  TlsWardend w(false);
  TlsProbe holder(w.tls_port, verified());
  const std::string grant =
      holder.call(resp_command({"ACQUIRE", "g/shared", "exclusive", "30000"}));
  ASSERT_TRUE(grant.starts_with("*3\r\n")) << grant << holder.error();
  PlainClient plain(w.server.port());
  plain.send(resp_command({"ACQUIRE", "g/shared", "exclusive", "30000"}));
  EXPECT_EQ(plain.read_some(), "$-1\r\n");  // not granted
}

TEST(WardendTlsTest, TheConnectionLimitCountsBothListeners) {
  TlsWardend w(false, {"--max-connections", "1"});
  // The start-up check's connection may not have been seen closed yet: the one slot is
  // ours once a PING is answered.
  std::unique_ptr<PlainClient> plain;
  for (int attempt = 0; attempt < 100; ++attempt) {
    plain = std::make_unique<PlainClient>(w.server.port());
    plain->send(kPing);
    if (plain->read_some() == "+PONG\r\n") break;
    plain.reset();
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(plain) << w.log();
  TlsProbe over(w.tls_port, verified());
  ASSERT_TRUE(over.handshake_ok()) << over.error();
  EXPECT_EQ(over.reply(), "-LIMIT too many connections\r\n") << over.error();
}

TEST(WardendTlsTest, ListenNoneLeavesOnlyTheTlsListener) {
  const TestCerts& certs = TestCerts::shared();
  TempDir dir("wardend-tls");
  ServerProcess process(
      {wardend_path(), "--listen", "none", "--data-dir", (dir.path() / "data").string(),
       "--tls-listen", "127.0.0.1:0", "--tls-cert", certs.server().cert.string(), "--tls-key",
       certs.server().key.string()},
      dir.path() / "wardend.log");
  process.start();
  const std::uint16_t port = wardend_tls_port(process);
  EXPECT_NE(process.log_text().find("without a plain-text listener"), std::string::npos)
      << process.log_text();
  TlsProbe probe(port, verified());
  EXPECT_EQ(probe.call(kPing), "+PONG\r\n") << probe.error();
}

// --- files that keep wardend from starting

// wardend's exit status and output for `args` (after a fresh data dir).
std::pair<int, std::string> start_wardend(const std::vector<std::string>& args) {
  TempDir dir("wardend-tls");
  std::string command = single_quoted(wardend_path()) + " --listen 127.0.0.1:0 --data-dir " +
                        single_quoted(dir.path() / "data");
  for (const auto& a : args) command += " " + single_quoted(a);
  return shell(command);
}

std::vector<std::string> tls_files(const std::string& cert, const std::string& key) {
  return {"--tls-listen", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key};
}

TEST(WardendTlsTest, ABadCertificateOrKeyFileKeepsTheServerFromStarting) {
  const TestCerts& certs = TestCerts::shared();
  TempDir dir("bad-pem");
  const std::string junk = (dir.path() / "junk.pem").string();
  std::ofstream(junk) << "not a certificate\n";
  const std::string missing = (dir.path() / "missing.pem").string();
  const std::string cert = certs.server().cert.string();
  const std::string key = certs.server().key.string();

  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {tls_files(missing, key), "TLS certificate '" + missing + "': No such file"},
      {tls_files(junk, key), "TLS certificate '" + junk + "'"},
      {tls_files(cert, junk), "TLS key '" + junk + "'"},
      {tls_files(cert, certs.client().key.string()), "does not belong to the certificate"},
      {tls_files(certs.expired().cert.string(), certs.expired().key.string()), "has expired"},
      {[&] {
         auto a = tls_files(cert, key);
         a.insert(a.end(), {"--tls-ca", missing});
         return a;
       }(),
       "TLS CA file '" + missing + "'"},
  };
  for (const Case& c : cases) {
    const auto [status, out] = start_wardend(c.args);
    EXPECT_EQ(status, 1) << out;
    EXPECT_NE(out.find(c.says), std::string::npos) << "expected '" << c.says << "' in: " << out;
    EXPECT_EQ(out.find("listening on"), std::string::npos) << out;
  }
}

TEST(WardendTlsTest, IncompleteTlsOptionsAreUsageErrors) {
  const TestCerts& certs = TestCerts::shared();
  const std::string cert = certs.server().cert.string();
  const std::vector<std::vector<std::string>> cases = {
      {"--tls-listen", "127.0.0.1:0", "--tls-cert", cert},             // no key
      {"--tls-cert", cert, "--tls-key", certs.server().key.string()},  // no listener
      {"--listen", "none"},                                            // nothing at all
  };
  for (const auto& args : cases) {
    const auto [status, out] = start_wardend(args);
    EXPECT_EQ(status, 64) << out;
  }
}

}  // namespace
}  // namespace warden::testing

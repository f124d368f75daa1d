// support/etcd_server.h — a throwaway etcd cluster for tests: one or more members on free
// loopback ports, each with a data dir in a temp dir of its own, started and stopped by
// PID, and etcdctl (API v3) to look behind the engine's back.
//
// Members run with a 10 ms heartbeat, a 100 ms election timeout and pre-vote, so a lost
// leader is replaced within a fraction of a second and a member back from pause() or
// start() does not force an election. The smallest lease TTL etcd grants is then 1 s
// (it rounds 0 up to 1), and a new leader gives every lease its full TTL again (etcd 3.4
// keeps no lease checkpoints by default). Nothing here is thread-safe: one test thread
// drives the cluster.
//
// With EtcdTls the members serve their client URLs over TLS only (https://,
// --cert-file/--key-file, and with client_cert_auth --trusted-ca-file +
// --client-cert-auth); peers talk plain HTTP to each other, which the tests do not look
// at. etcdctl then speaks TLS with TestCerts::shared()'s CA and client certificate.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/server_process.h"
#include "support/test_certs.h"

namespace warden::testing {

struct EtcdOptions {
  // Number of members (1 or 3 in practice; any n >= 1 works).
  int members = 1;
  // When set, the constructor creates the user "root" (role root) with this password and
  // enables authentication before it returns. Must not be empty.
  std::optional<std::string> root_password;
};

// TLS on the members' client URLs (see above). A struct of its own, beside EtcdOptions,
// so that the positional EtcdOptions{n, password} of existing tests stays complete.
struct EtcdTls {
  // The members' certificate; TestCerts::shared().server() when not set. Another one
  // (expired, wrong_host) makes a cluster every verifying client must refuse; the
  // cluster's own etcdctl then skips verification to look behind the client's back.
  std::optional<CertPair> server_cert;
  // Ask every client for a certificate signed by TestCerts::shared().ca().
  bool client_cert_auth = true;
};

class EtcdCluster {
 public:
  // Starts every member and returns once a leader is elected and every member answers
  // (etcdctl endpoint health). A member that cannot bind its ports moves the whole
  // cluster to new ports, a couple of times. Throws std::runtime_error otherwise, with the
  // tail of the members' logs in the message.
  explicit EtcdCluster(EtcdOptions options = {});
  // The same, serving clients over TLS only.
  EtcdCluster(EtcdOptions options, EtcdTls tls);
  ~EtcdCluster();  // kill -9 every member; removes the temp dir with the data dirs
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  int size() const { return static_cast<int>(members_.size()); }
  std::uint16_t client_port(int member) const;
  // "127.0.0.1:PORT" of one member's client URL.
  std::string endpoint(int member) const;
  // "etcd://127.0.0.1:P0,127.0.0.1:P1,...", with "root:PASSWORD@" (percent-encoded) after
  // "etcd://" when authentication is on. With TLS: "etcds://…?ca=CA&cert=CLIENT&key=KEY"
  // (TestCerts::shared(): the CA, and the client certificate when client_cert_auth).
  std::string uri() const;
  // The same, always without user and password (with TLS still etcds:// with its query).
  std::string bare_uri() const;
  // One member only: "etcd://[root:PASSWORD@]127.0.0.1:P" (with TLS as uri()).
  std::string uri_of(int member) const;
  // "127.0.0.1:P0,127.0.0.1:P1,...": every member's host:port, no scheme, no query.
  std::string endpoints() const;
  bool tls() const { return tls_.has_value(); }

  // kill -9: the member is gone when it returns (its data dir stays).
  void kill9(int member);
  // Starts a member again after kill9() with the same data dir and ports; returns once it
  // answers (etcdctl endpoint health on it). While too few other members run (and are not
  // paused) for a quorum, it returns once it listens: etcd serves clients only after it
  // has joined a leader. Throws std::runtime_error if it does not come up.
  void start(int member);
  // SIGSTOP / SIGCONT.
  void pause(int member);
  void resume(int member);
  bool running(int member);
  bool paused(int member) const;

  // Index of the current leader, as the running, not paused members see it (the member
  // that reports itself leader at the highest term). Retries for up to ~5 s while an
  // election is under way; throws std::runtime_error if there is none.
  int leader();

  // Runs etcdctl (API v3) with `args` against the running, not paused members (or only
  // `only_member` when >= 0), with the root credentials when authentication is on, and
  // bounded by --dial-timeout / --command-timeout (and killed after 30 s in any case).
  // Returns stdout; throws std::runtime_error with stderr on a non-zero exit.
  std::string etcdctl(const std::vector<std::string>& args, int only_member = -1);
  // Every key under `prefix` (all keys by default), sorted; binary-safe.
  std::vector<std::string> keys(const std::string& prefix = "");
  // Every key under `prefix` with its create_revision, in create_revision order (the
  // order of etcd:// lock requests); binary-safe.
  struct KeyRevision {
    std::string key;
    std::int64_t create_revision = 0;
    std::string value;
  };
  std::vector<KeyRevision> keys_by_revision(const std::string& prefix);
  // Deletes every key under `prefix` (all keys for ""); returns how many.
  long long delete_prefix(const std::string& prefix);

  ServerProcess& process(int member);
  const EtcdOptions& options() const { return options_; }

 private:
  struct Member {
    std::uint16_t client_port = 0;
    std::uint16_t peer_port = 0;
    ServerProcess process;
    bool paused = false;
  };
  struct Run {  // one etcdctl run
    int status = -1;
    std::string out;
    std::string err;
  };

  Member& at(int member);
  const Member& at(int member) const;
  void start_cluster();  // the constructors' work
  // Starts every member on fresh ports; true once all answer, false if one could not bind.
  bool start_all(int attempt);
  void enable_auth();
  std::vector<int> reachable();  // running and not paused
  // A probe has short timeouts: it is repeated until it succeeds.
  Run run_etcdctl(const std::vector<int>& members, const std::vector<std::string>& args,
                  bool probe = false) const;
  bool healthy(const std::vector<int>& members) const;
  std::string log_tails() const;
  std::string credentials() const;
  std::string scheme() const;     // "etcd://" or "etcds://"
  std::string tls_query() const;  // "" or "?ca=…[&cert=…&key=…]"

  EtcdOptions options_;
  std::optional<EtcdTls> tls_;
  TempDir dir_;
  std::vector<Member> members_;
  bool auth_on_ = false;
};

// Paths of etcd and etcdctl (found on PATH, or in /usr/bin).
std::string etcd_path();
std::string etcdctl_path();

// The key prefix under which the etcd:// engine keeps every request of the lock (group,
// name) with its default key prefix: "warden/GROUP/NAME'/", where NAME' is the name
// with '%' and '/' percent-escaped (src/engines/etcd/lock_keys.h).
inline std::string etcd_lock_prefix(std::string_view group, std::string_view name) {
  std::string prefix = "warden/";
  prefix += group;
  prefix += '/';
  for (const char c : name) {
    if (c == '%') {
      prefix += "%25";
    } else if (c == '/') {
      prefix += "%2F";
    } else {
      prefix += c;
    }
  }
  prefix += '/';
  return prefix;
}

}  // namespace warden::testing

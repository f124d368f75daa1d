#include "support/test_certs.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

extern char** environ;

namespace warden::testing {
namespace {

namespace fs = std::filesystem;

// Runs `openssl args...` to completion with its output in `log`; throws with that
// output if it fails.
void openssl(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<std::string> argv = {"openssl"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, "openssl", &actions, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot run openssl (is it installed?)");
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::ifstream in(log);
    std::stringstream out;
    out << in.rdbuf();
    std::string command;
    for (const auto& a : argv) command += a + " ";
    throw std::runtime_error("'" + command + "' failed:\n" + out.str());
  }
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

const std::vector<std::string> kNewEcKey = {"-newkey", "ec", "-pkeyopt",
                                            "ec_paramgen_curve:prime256v1", "-nodes"};

// A self-signed CA named `cn`.
CertPair make_ca(const fs::path& dir, const std::string& name, const std::string& cn) {
  CertPair pair{dir / (name + ".pem"), dir / (name + ".key")};
  std::vector<std::string> args = {"req", "-x509"};
  args.insert(args.end(), kNewEcKey.begin(), kNewEcKey.end());
  args.insert(args.end(),
              {"-keyout", pair.key.string(), "-out", pair.cert.string(), "-days", "3650", "-subj",
               "/CN=" + cn, "-addext", "basicConstraints=critical,CA:TRUE", "-addext",
               "keyUsage=critical,keyCertSign,cRLSign"});
  openssl(args, dir / (name + ".log"));
  return pair;
}

// A key and a signing request for `cn`.
fs::path make_request(const fs::path& dir, const std::string& name, const std::string& cn,
                      CertPair& pair) {
  pair = {dir / (name + ".pem"), dir / (name + ".key")};
  const fs::path csr = dir / (name + ".csr");
  std::vector<std::string> args = {"req", "-new"};
  args.insert(args.end(), kNewEcKey.begin(), kNewEcKey.end());
  args.insert(args.end(),
              {"-keyout", pair.key.string(), "-out", csr.string(), "-subj", "/CN=" + cn});
  openssl(args, dir / (name + ".log"));
  return csr;
}

// A certificate for `cn` with the extensions `extensions` (an openssl config section
// body), signed by `ca`, valid for ten years from now.
CertPair make_leaf(const fs::path& dir, const std::string& name, const std::string& cn,
                   const std::string& extensions, const CertPair& ca, int serial) {
  CertPair pair;
  const fs::path csr = make_request(dir, name, cn, pair);
  const fs::path ext = dir / (name + ".ext");
  write_file(ext, "[v3]\n" + extensions);
  openssl({"x509", "-req", "-in", csr.string(), "-CA", ca.cert.string(), "-CAkey", ca.key.string(),
           "-set_serial", std::to_string(serial), "-days", "3650", "-sha256", "-extfile",
           ext.string(), "-extensions", "v3", "-out", pair.cert.string()},
          dir / (name + ".sign.log"));
  return pair;
}

// Like make_leaf, but valid only on 2020-01-01: `openssl x509` cannot date a
// certificate in the past, `openssl ca` can.
CertPair make_expired_leaf(const fs::path& dir, const std::string& name, const std::string& cn,
                           const std::string& extensions, const CertPair& ca) {
  CertPair pair;
  const fs::path csr = make_request(dir, name, cn, pair);
  const fs::path db = dir / (name + "-db");
  fs::create_directories(db);
  write_file(db / "index.txt", "");
  write_file(db / "serial", "1000\n");
  const fs::path config = dir / (name + ".cnf");
  write_file(config,
             "[ca]\ndefault_ca = test\n"
             "[test]\ndatabase = " +
                 (db / "index.txt").string() +
                 "\n"
                 "new_certs_dir = " +
                 db.string() +
                 "\n"
                 "serial = " +
                 (db / "serial").string() +
                 "\n"
                 "default_md = sha256\npolicy = any\nunique_subject = no\n"
                 "[any]\ncommonName = supplied\n"
                 "[v3]\n" +
                 extensions);
  openssl({"ca", "-batch", "-config", config.string(), "-cert", ca.cert.string(), "-keyfile",
           ca.key.string(), "-in", csr.string(), "-out", pair.cert.string(), "-startdate",
           "20200101000000Z", "-enddate", "20200102000000Z", "-extensions", "v3", "-notext"},
          dir / (name + ".sign.log"));
  return pair;
}

const std::string kServerExtensions =
    "basicConstraints = CA:FALSE\n"
    "extendedKeyUsage = serverAuth\n"
    "subjectAltName = DNS:localhost,IP:127.0.0.1\n";
const std::string kClientExtensions =
    "basicConstraints = CA:FALSE\n"
    "extendedKeyUsage = clientAuth\n";

}  // namespace

TestCerts::TestCerts() {
  const fs::path& d = dir_.path();
  ca_ = make_ca(d, "ca", "warden test CA");
  wrong_ca_ = make_ca(d, "wrong-ca", "warden test CA (the wrong one)");
  server_ = make_leaf(d, "server", "localhost", kServerExtensions, ca_, 101);
  client_ = make_leaf(d, "client", "warden-client", kClientExtensions, ca_, 102);
  stranger_ = make_leaf(d, "stranger", "warden-client", kClientExtensions, wrong_ca_, 103);
  wrong_host_ = make_leaf(d, "wrong-host", "wrong.example",
                          "basicConstraints = CA:FALSE\nextendedKeyUsage = serverAuth\n"
                          "subjectAltName = DNS:wrong.example\n",
                          ca_, 104);
  expired_ = make_expired_leaf(d, "expired", "localhost", kServerExtensions, ca_);
}

const TestCerts& TestCerts::shared() {
  static const TestCerts certs;
  return certs;
}

}  // namespace warden::testing

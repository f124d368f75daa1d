// support/test_certs.h — certificates made at test time by the `openssl` CLI, so TLS
// tests check warden against certificates it did not make itself.
//
// One TestCerts is a temp dir with a CA and everything signed by it, plus the bad cases
// every TLS client must refuse on its own: a second, unrelated CA; a server certificate
// that expired; one for another host name. Keys are EC P-256 (fast to make); every
// certificate and key is PEM.
//
//   ca          the CA that clients and servers trust
//   server      CN=localhost, SAN DNS:localhost + IP:127.0.0.1, signed by ca
//   client      CN=warden-client, extendedKeyUsage clientAuth, signed by ca
//   wrong_ca    an unrelated CA (trusting it instead of ca must fail)
//   stranger    a client certificate signed by wrong_ca (mTLS must refuse it)
//   expired     like server, signed by ca, valid only in 2020
//   wrong_host  signed by ca, for DNS:wrong.example only (host name check must fail)
#pragma once

#include <filesystem>
#include <string>

#include "support/server_process.h"

namespace warden::testing {

// A certificate and its private key.
struct CertPair {
  std::filesystem::path cert;
  std::filesystem::path key;
};

class TestCerts {
 public:
  // Makes every certificate above; throws std::runtime_error (with openssl's output)
  // if the openssl CLI fails.
  TestCerts();
  TestCerts(const TestCerts&) = delete;
  TestCerts& operator=(const TestCerts&) = delete;

  const CertPair& ca() const { return ca_; }
  const CertPair& server() const { return server_; }
  const CertPair& client() const { return client_; }
  const CertPair& wrong_ca() const { return wrong_ca_; }
  const CertPair& stranger() const { return stranger_; }
  const CertPair& expired() const { return expired_; }
  const CertPair& wrong_host() const { return wrong_host_; }
  const std::filesystem::path& dir() const { return dir_.path(); }

  // The same set, made once per test process (making it takes ~100 ms of openssl runs).
  static const TestCerts& shared();

 private:
  TempDir dir_{"warden-certs"};
  CertPair ca_, server_, client_, wrong_ca_, stranger_, expired_, wrong_host_;
};

}  // namespace warden::testing

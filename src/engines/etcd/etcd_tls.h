// engines/etcd/etcd_tls.h — etcd:// over TLS: the gRPC channel credentials an
// EtcdConfig asks for, and what a failed call says about TLS.
//
// Credentials: plain TCP without tls=1; otherwise grpc::SslCredentials with the PEM
// files of ca= (without it, gRPC's default roots), cert= and key=, read once when the
// engine is opened. gRPC checks the member's certificate chain and that it names the
// host of the target ("127.0.0.1:2379" needs an IP SAN 127.0.0.1, "localhost:2379" a
// DNS SAN localhost).
//
// Failures: gRPC 1.51 reports every failed handshake as UNAVAILABLE, like a member that
// is down (docs/engines/etcd.md lists what each case looks like):
//   - we refused the member's certificate (unknown CA, expired, another host): the
//     status message says so ("certificate verify failed", "Peer name … is not in peer
//     certificate"); tls_failure() makes it permission_denied, for every call
//   - the member refused our certificate (none, or one from another CA), or does not
//     speak TLS: the status says only that the connection ended. When Client::open
//     fails so, explain_open_failure() asks probe_tls() (tls_probe.h) and makes it
//     permission_denied, or unavailable with a message naming TLS
//   - a plain client on a TLS port: the connection ended as well; the message of
//     explain_open_failure() says to use etcds://
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tls_options.h"
#include "warden/error.h"

namespace grpc {
class ChannelCredentials;
class Status;
}  // namespace grpc

namespace warden::engines::etcd {

// The credentials of every channel to the cluster. Throws Error(permission_denied)
// naming a file that cannot be read, Error(invalid_argument) naming one that holds no
// PEM block.
std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const core::TlsOptions& tls);

// What a failed call's status says about TLS: the code for it and a sentence to put
// before gRPC's own message; nullopt when it says nothing about TLS. `tls` is whether
// the channel speaks TLS.
struct TlsFailure {
  Errc code;
  const char* why;
};
std::optional<TlsFailure> tls_failure(const grpc::Status& status, bool tls);

// Client::open failed with `error` (unavailable) on every one of `endpoints`: a better
// Error when a TLS handshake of our own (tls.enabled), or the failure's text, tells why;
// nullopt otherwise. Takes at most `timeout` per endpoint.
std::optional<Error> explain_open_failure(const Error& error,
                                          const std::vector<std::string>& endpoints,
                                          const core::TlsOptions& tls,
                                          std::chrono::milliseconds timeout);

}  // namespace warden::engines::etcd

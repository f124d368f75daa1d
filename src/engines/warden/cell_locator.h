// engines/warden/cell_locator.h — where a wardend cell's leader is, for
// warden://h1:p1,h2:p2,h3:p3 (docs/cell.md).
//
// Only the leader serves; the other members answer every request but PING, QUIT and
// AUTH with `-MOVED host:port` (the leader's address) or `-TRYAGAIN` (no leader yet). A
// connection is made to the leader as last found, else to each member in turn: it
// authenticates as usual, then asks HELLO, and is kept only if the member answers it.
// A MOVED is followed at once (to the address the member names), a TRYAGAIN or a member
// that cannot be reached moves on to the next. A leader that stops leading closes every
// connection, so its clients come back here.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engines/resp_client/cluster_slots.h"
#include "engines/resp_client/server_locator.h"

namespace warden::engines::wardend {

class CellLocator final : public resp_client::ServerLocator {
 public:
  explicit CellLocator(std::vector<resp_client::Endpoint> members);

  // Tries the last leader found, then every member once (and every MOVED they answer),
  // each bounded by data.timeout. Throws Error: permission_denied / invalid_argument as
  // Connection::open does (a wrong password is wrong on every member); unavailable
  // naming each member and why it did not serve.
  std::unique_ptr<resp_client::Connection> connect(
      const resp_client::ConnectOptions& data,
      const std::shared_ptr<const resp_client::TlsContext>& tls) override;
  void forget(const std::string& endpoint) override;
  bool is_current(const std::string& endpoint) override;
  const std::string& description() const override { return description_; }

 private:
  const std::vector<resp_client::Endpoint> members_;
  const std::string description_;
  std::mutex mu_;
  std::optional<resp_client::Endpoint> leader_;  // guarded by mu_
  std::size_t next_ = 0;                         // guarded by mu_: the member to try first
};

// The address in a `MOVED host:port` error; nullopt for anything else.
std::optional<resp_client::Endpoint> moved_to(std::string_view error);

}  // namespace warden::engines::wardend

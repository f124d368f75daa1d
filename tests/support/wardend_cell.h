// support/wardend_cell.h — a wardend cell on loopback: N members, each on a free port
// pair (clients, then the bus), its own data dir, started and stopped by PID.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "support/server_process.h"

namespace warden::testing {

class WardendCell {
 public:
  // Starts every member (`extra_args` given to each; with --requirepass, the fixture
  // authenticates; with `--listen none` and a TLS listener of the test certificates
  // (support/tls_wardend.h), it asks over TLS) and waits for a leader.
  explicit WardendCell(std::size_t members = 3, std::vector<std::string> extra_args = {});

  std::size_t size() const { return ports_.size(); }
  std::uint16_t port(std::size_t i) const { return ports_.at(i); }
  ServerProcess& process(std::size_t i) { return processes_.at(i); }
  // Member i's data dir.
  std::filesystem::path data_dir(std::size_t i) const;
  // The --cell list every member is given.
  const std::string& members() const { return members_; }

  // (Re)starts member i on its ports with its data dir; waits until it listens.
  void start(std::size_t i);
  // Starts a new member to be added to the running cell (`--cell-join`), on ports of its
  // own, given the members so far and itself; returns its index (its id is index + 1).
  // The cell does not know it until someone asks its leader CELL ADD joiner_spec(i).
  std::size_t start_joiner();
  // "id@127.0.0.1:port" of member i.
  std::string spec(std::size_t i) const;
  // The member that serves as leader, once it does and every other running member
  // sends its clients there (-MOVED); `not_this` is skipped (the old leader, frozen).
  // Throws std::runtime_error, with every member's log, after `timeout`.
  std::size_t wait_for_leader(std::chrono::milliseconds timeout = std::chrono::seconds(60),
                              std::optional<std::size_t> not_this = std::nullopt);
  // Member i's answer to INFO, as TextClient tells it ("$..." from the leader,
  // "-MOVED host:port" from a follower); throws if it cannot be asked.
  std::string info(std::size_t i) const;
  // Every member's log, for a failure message.
  std::string logs() const;

 private:
  TempDir dir_;
  std::vector<std::string> extra_args_;
  std::vector<std::uint16_t> ports_;
  std::string members_;
  std::optional<std::string> password_;  // from --requirepass in the extra arguments
  bool tls_only_ = false;                // `--listen none`: members are asked over TLS
  std::vector<bool> joined_;             // started with --cell-join
  std::vector<ServerProcess> processes_;
};

}  // namespace warden::testing

#include "support/wardend_cell.h"

#include <stdexcept>
#include <thread>

#include "support/test_certs.h"
#include "support/text_client.h"
#include "support/tls_probe.h"

namespace warden::testing {

using namespace std::chrono_literals;

WardendCell::WardendCell(std::size_t members, std::vector<std::string> extra_args)
    : dir_("wardend-cell"), extra_args_(std::move(extra_args)) {
  for (std::size_t i = 0; i + 1 < extra_args_.size(); ++i) {
    if (extra_args_[i] == "--requirepass") password_ = extra_args_[i + 1];
    if (extra_args_[i] == "--listen" && extra_args_[i + 1] == "none") tls_only_ = true;
  }
  for (std::size_t i = 0; i < members; ++i) {
    ports_.push_back(free_port_pair());
    members_ += (i ? "," : "") + std::to_string(i + 1) + "@127.0.0.1:" + std::to_string(ports_[i]);
  }
  processes_.resize(members);
  joined_.resize(members, false);
  for (std::size_t i = 0; i < members; ++i) start(i);
  wait_for_leader();
}

std::filesystem::path WardendCell::data_dir(std::size_t i) const {
  return dir_.path() / ("member" + std::to_string(i + 1));
}

void WardendCell::start(std::size_t i) {
  const std::string name = "member" + std::to_string(i + 1);
  std::vector<std::string> argv = {
      wardend_path(),      "--cell", members_, "--node", std::to_string(i + 1), "--data-dir",
      data_dir(i).string()};
  if (joined_[i]) argv.push_back("--cell-join");
  argv.insert(argv.end(), extra_args_.begin(), extra_args_.end());
  if (processes_[i].pid() > 0) processes_[i].kill9();
  processes_[i] = ServerProcess(argv, dir_.path() / (name + ".log"));
  processes_[i].start();
  if (!processes_[i].wait_for_log("listening on", 30s) || !wait_for_port(ports_[i], 10s)) {
    throw std::runtime_error("cell member " + std::to_string(i + 1) + " did not start:\n" + logs());
  }
}

std::string WardendCell::info(std::size_t i) const {
  if (!tls_only_) {
    TextClient c(ports_[i], 2);
    if (password_) c({"AUTH", *password_});
    return c({"INFO"});
  }
  TlsProbeOptions options;
  options.ca = TestCerts::shared().ca().cert;
  options.host = "127.0.0.1";
  options.timeout = 2s;
  TlsProbe probe(ports_[i], options);
  if (password_) probe.call(resp_command({"AUTH", *password_}));
  std::string reply = probe.call(resp_command({"INFO"}));
  if (reply.empty()) return "";
  // As TextClient tells it: "-MOVED host:port", or "$" and the text.
  if (reply.starts_with("-")) return reply.substr(0, reply.find("\r\n"));
  if (reply.starts_with("$")) return "$" + reply.substr(reply.find("\r\n") + 2);
  return reply;
}

std::string WardendCell::spec(std::size_t i) const {
  return std::to_string(i + 1) + "@127.0.0.1:" + std::to_string(ports_.at(i));
}

std::size_t WardendCell::start_joiner() {
  const std::size_t i = ports_.size();
  ports_.push_back(free_port_pair());
  members_ += "," + spec(i);
  processes_.emplace_back();
  joined_.push_back(true);
  start(i);
  return i;
}

std::size_t WardendCell::wait_for_leader(std::chrono::milliseconds timeout,
                                         std::optional<std::size_t> not_this) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::optional<std::size_t> leader;
    std::vector<std::string> answers(size());
    for (std::size_t i = 0; i < size(); ++i) {
      if (i == not_this || !processes_[i].running()) continue;
      try {
        answers[i] = info(i);
      } catch (const std::exception&) {
        continue;
      }
      if (answers[i].starts_with("$")) leader = i;
    }
    if (leader) {
      const std::string moved = "-MOVED 127.0.0.1:" + std::to_string(ports_[*leader]);
      bool agreed = true;
      for (std::size_t i = 0; i < size(); ++i) {
        if (i != *leader && !answers[i].empty() && answers[i] != moved) agreed = false;
      }
      if (agreed) return *leader;
    }
    std::this_thread::sleep_for(50ms);
  }
  throw std::runtime_error("the cell found no leader in time:\n" + logs());
}

std::string WardendCell::logs() const {
  std::string out;
  for (std::size_t i = 0; i < processes_.size(); ++i) {
    out += "--- member " + std::to_string(i + 1) + "\n" + processes_[i].log_text();
  }
  return out;
}

}  // namespace warden::testing

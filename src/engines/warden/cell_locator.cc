#include "engines/warden/cell_locator.h"

#include <deque>
#include <string_view>

#include "core/uri.h"
#include "engines/resp_client/connection.h"
#include "warden/error.h"

namespace warden::engines::wardend {
namespace {

std::string describe(const std::vector<resp_client::Endpoint>& members) {
  std::string out = "wardend cell ";
  for (std::size_t i = 0; i < members.size(); ++i) {
    out += (i ? "," : "") + members[i].to_string();
  }
  return out;
}

}  // namespace

std::optional<resp_client::Endpoint> moved_to(std::string_view error) {
  constexpr std::string_view kMoved = "MOVED ";
  if (!error.starts_with(kMoved)) return std::nullopt;
  const std::string_view address = error.substr(kMoved.size());
  const auto colon = address.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  const auto port = core::parse_int_in_range(address.substr(colon + 1), 1, 65535);
  if (!port) return std::nullopt;
  std::string_view host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return resp_client::Endpoint{std::string(host), static_cast<std::uint16_t>(*port)};
}

CellLocator::CellLocator(std::vector<resp_client::Endpoint> members)
    : members_(std::move(members)), description_(describe(members_)) {}

std::unique_ptr<resp_client::Connection> CellLocator::connect(
    const resp_client::ConnectOptions& data,
    const std::shared_ptr<const resp_client::TlsContext>& tls) {
  std::deque<resp_client::Endpoint> candidates;
  {
    std::lock_guard guard(mu_);
    if (leader_) candidates.push_back(*leader_);
    for (std::size_t i = 0; i < members_.size(); ++i) {
      candidates.push_back(members_[(next_ + i) % members_.size()]);
    }
    next_ = (next_ + 1) % members_.size();
  }
  // Every member once, and as many redirects again: enough to find a leader that was
  // just elected, never a loop between members that disagree.
  std::size_t budget = 2 * members_.size() + 1;
  std::string why;
  while (!candidates.empty() && budget-- > 0) {
    const resp_client::Endpoint at = candidates.front();
    candidates.pop_front();
    resp_client::ConnectOptions options = data;
    options.locator = nullptr;
    options.host = at.host;
    options.port = at.port;
    const std::string where = at.to_string();
    try {
      auto conn = resp_client::Connection::open(options, tls);
      const std::string_view hello[] = {"HELLO"};
      const resp_client::Reply reply =
          conn->command(std::span<const std::string_view>(hello), Clock::now() + data.timeout);
      if (!reply.is_error()) {
        std::lock_guard guard(mu_);
        leader_ = at;
        return conn;
      }
      if (const auto leader = moved_to(reply.text)) {
        why += "; " + where + " follows " + leader->to_string();
        candidates.push_front(*leader);
        continue;
      }
      why += "; " + where + " answered " + reply.describe();
    } catch (const Error& e) {
      if (e.code() == Errc::permission_denied || e.code() == Errc::invalid_argument) throw;
      why += "; " + std::string(e.what());
    }
    forget(where);
  }
  throw Error(Errc::unavailable, "no member of the " + description_ + " leads" +
                                     (why.empty() ? "" : ": ") +
                                     (why.empty() ? std::string() : why.substr(2)));
}

void CellLocator::forget(const std::string& endpoint) {
  std::lock_guard guard(mu_);
  if (leader_ && leader_->to_string() == endpoint) leader_.reset();
}

bool CellLocator::is_current(const std::string& endpoint) {
  std::lock_guard guard(mu_);
  return !leader_ || leader_->to_string() == endpoint;
}

}  // namespace warden::engines::wardend

#include "engines/warden/key_watch.h"

#include <optional>
#include <string>
#include <utility>

#include "engines/resp_client/connection.h"
#include "engines/resp_client/errors.h"
#include "engines/resp_client/stop_waker.h"

namespace warden::engines::wardend {

namespace {

using resp_client::Connection;
using resp_client::Reply;

class WardenKeyWatch final : public core::KeyWatch {
 public:
  explicit WardenKeyWatch(std::unique_ptr<Connection> conn) : conn_(std::move(conn)) {}

  bool wait(Clock::time_point until, const std::stop_token& stop) override {
    if (broken_) return false;
    const resp_client::StopWaker waker(stop);
    try {
      while (!stop.stop_requested()) {
        std::optional<Reply> push = conn_->poll_reply(until, waker.fd());
        if (!push) return false;  // `until` passed, or stopped
        if (!is_changed(*push)) continue;
        // Pushes already here are the same news.
        while (conn_->poll_reply(Clock::now()).has_value()) {
        }
        return true;
      }
    } catch (const Error&) {
      broken_ = true;  // the server went away: the caller looks, and opens another
    }
    return false;
  }

  bool broken() const override { return broken_; }

 private:
  static bool is_changed(const Reply& reply) {
    return reply.is_array() && !reply.elements.empty() && reply.elements[0].text == "CHANGED";
  }
  std::unique_ptr<Connection> conn_;
  bool broken_ = false;
};

}  // namespace

std::unique_ptr<core::KeyWatch> open_key_watch(resp_client::Connector& connector,
                                               const core::LockKey& key,
                                               Clock::time_point deadline) {
  auto conn = connector.connect();
  const std::string wire_key = key.joined();
  const std::string_view args[] = {"WATCH", wire_key};
  const Reply reply = conn->command(args, deadline);
  const std::string context = "WATCH on " + connector.endpoint();
  if (reply.is_error()) throw resp_client::reply_error(reply, context);
  if (reply.type != Reply::Type::status) throw resp_client::unexpected_reply(reply, context);
  return std::make_unique<WardenKeyWatch>(std::move(conn));
}

}  // namespace warden::engines::wardend

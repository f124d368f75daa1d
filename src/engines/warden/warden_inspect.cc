// warden://'s status: wardend's INSPECT and LIST (docs/protocol.md) on the control
// connection, their replies read into the public status types.
#include <chrono>
#include <string>

#include "engines/resp_client/errors.h"
#include "engines/warden/warden_engine.h"

namespace warden::engines::wardend {
namespace {

using resp_client::Reply;
using std::chrono::milliseconds;

const Reply& checked(const Reply& reply, const std::string& context) {
  if (reply.is_error()) throw resp_client::reply_error(reply, context);
  return reply;
}

std::int64_t integer_at(const Reply& row, std::size_t i, const Reply& whole,
                        const std::string& context) {
  if (i >= row.elements.size() || !row.elements[i].is_integer()) {
    throw resp_client::unexpected_reply(whole, context);
  }
  return row.elements[i].integer;
}

Mode mode_at(const Reply& row, const Reply& whole, const std::string& context) {
  if (row.elements.empty() || row.elements[0].type != Reply::Type::bulk) {
    throw resp_client::unexpected_reply(whole, context);
  }
  if (row.elements[0].text == "exclusive") return Mode::exclusive;
  if (row.elements[0].text == "shared") return Mode::shared;
  throw resp_client::unexpected_reply(whole, context);
}

// The integer at `i` of a row if the row has one (a semaphore's permits), else 0.
std::uint32_t permits_at(const Reply& row, std::size_t i, const Reply& whole,
                         const std::string& context) {
  if (i >= row.elements.size()) return 0;
  const auto permits = integer_at(row, i, whole, context);
  if (permits < 0 || permits > 1'000'000) throw resp_client::unexpected_reply(whole, context);
  return static_cast<std::uint32_t>(permits);
}

// INSPECT's reply: "holders" [[mode, token, ms(, permits)]...] "waiters" [[mode, ms(,
// permits)]...] "delayed_ms" ms (, "permits" n for a semaphore) (, "values" [value...]
// with one value per holder when a leader has one), read by label so that later labels
// are ignored.
LockStatus parse_inspect(const Reply& reply, const std::string& context) {
  checked(reply, context);
  if (!reply.is_array() || reply.elements.size() % 2 != 0) {
    throw resp_client::unexpected_reply(reply, context);
  }
  LockStatus s;
  const Reply* values = nullptr;
  for (std::size_t i = 0; i + 1 < reply.elements.size(); i += 2) {
    const std::string& label = reply.elements[i].text;
    const Reply& value = reply.elements[i + 1];
    if (label == "holders" || label == "waiters") {
      if (!value.is_array()) throw resp_client::unexpected_reply(reply, context);
      for (const Reply& row : value.elements) {
        if (!row.is_array()) throw resp_client::unexpected_reply(reply, context);
        const Mode mode = mode_at(row, reply, context);
        if (label == "holders") {
          const auto token = integer_at(row, 1, reply, context);
          const auto left = integer_at(row, 2, reply, context);
          s.holders.push_back(HolderStatus{mode, static_cast<std::uint64_t>(token),
                                           milliseconds(left),
                                           permits_at(row, 3, reply, context)});
        } else {
          const auto left = integer_at(row, 1, reply, context);
          s.waiters.push_back(
              WaiterStatus{mode, left < 0 ? std::nullopt : std::optional(milliseconds(left)),
                           permits_at(row, 2, reply, context)});
        }
      }
    } else if (label == "delayed_ms") {
      if (!value.is_integer()) throw resp_client::unexpected_reply(reply, context);
      s.lock_delay_left = milliseconds(value.integer);
    } else if (label == "permits") {
      if (!value.is_integer() || value.integer < 1 || value.integer > 1'000'000) {
        throw resp_client::unexpected_reply(reply, context);
      }
      s.permits = static_cast<std::uint32_t>(value.integer);
    } else if (label == "values") {
      values = &value;
    }
  }
  if (values != nullptr) {
    if (!values->is_array() || values->elements.size() != s.holders.size()) {
      throw resp_client::unexpected_reply(reply, context);
    }
    for (std::size_t i = 0; i < s.holders.size(); ++i) {
      if (values->elements[i].type != Reply::Type::bulk) {
        throw resp_client::unexpected_reply(reply, context);
      }
      s.holders[i].value = values->elements[i].text;
    }
  }
  return s;
}

}  // namespace

LockStatus inspect_on(resp_client::Pipeline& control, const core::LockKey& key,
                      const std::string& endpoint) {
  const auto result = control.run({{"INSPECT", key.joined()}});
  LockStatus s = parse_inspect(result.replies.at(0), "INSPECT on " + endpoint);
  s.group = key.group;
  s.name = key.name;
  return s;
}

std::vector<LockSummary> list_on(resp_client::Pipeline& control, std::string_view group,
                                 const std::string& endpoint) {
  const std::string context = "LIST on " + endpoint;
  std::vector<LockSummary> out;
  std::string cursor;
  while (true) {
    const auto result = control.run({{"LIST", std::string(group), cursor}});
    const Reply& reply = checked(result.replies.at(0), context);
    if (!reply.is_array() || reply.elements.size() != 2 ||
        reply.elements[0].type != Reply::Type::bulk || !reply.elements[1].is_array()) {
      throw resp_client::unexpected_reply(reply, context);
    }
    for (const Reply& row : reply.elements[1].elements) {
      if (!row.is_array() || row.elements.size() != 3 ||
          row.elements[0].type != Reply::Type::bulk) {
        throw resp_client::unexpected_reply(reply, context);
      }
      out.push_back(LockSummary{row.elements[0].text,
                                static_cast<std::size_t>(integer_at(row, 1, reply, context)),
                                static_cast<std::size_t>(integer_at(row, 2, reply, context))});
    }
    // "" ends the listing; a cursor that does not move on would loop forever.
    const std::string& next = reply.elements[0].text;
    if (next.empty()) return out;
    if (next <= cursor) throw resp_client::unexpected_reply(reply, context);
    cursor = next;
  }
}

}  // namespace warden::engines::wardend

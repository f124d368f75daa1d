#include "engines/etcd/permit_queue.h"

#include <charconv>

#include "engines/etcd/request_value.h"

namespace warden::engines::etcd {
namespace {

constexpr std::string_view kPermitsTag = "warden permits ";

// The unsigned number at the start of `text`, and the text after it and one space.
std::optional<std::uint32_t> take_number(std::string_view& text) {
  std::uint32_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  text.remove_prefix(static_cast<std::size_t>(end - text.data()));
  if (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  return value;
}

}  // namespace

std::string permits_value(std::uint32_t permits, std::uint32_t capacity, std::string_view client) {
  return std::string(kPermitsTag) + std::to_string(permits) + ' ' + std::to_string(capacity) + ' ' +
         std::string(client);
}

std::optional<QueuedRequest> parse_request(std::string_view rest, std::string_view value,
                                           std::int64_t revision) {
  QueuedRequest r;
  r.revision = revision;
  if (rest.starts_with("w/")) {
    r.kind = QueuedRequest::Kind::exclusive;
    r.value = candidate_value(value);
  } else if (rest.starts_with("s/")) {
    r.kind = QueuedRequest::Kind::shared;
    r.value = candidate_value(value);
  } else if (rest.starts_with("p/") && value.starts_with(kPermitsTag)) {
    r.kind = QueuedRequest::Kind::permits;
    value.remove_prefix(kPermitsTag.size());
    const auto permits = take_number(value);
    const auto capacity = take_number(value);
    if (!permits || !capacity || *permits == 0 || *permits > *capacity) return std::nullopt;
    r.permits = *permits;
    r.capacity = *capacity;
  } else {
    return std::nullopt;
  }
  return r;
}

Verdict judge_permits(const std::vector<QueuedRequest>& requests, std::int64_t revision,
                      std::uint32_t permits, std::uint32_t capacity) {
  std::uint64_t ahead = 0;
  for (const QueuedRequest& r : requests) {
    if (r.revision >= revision) continue;
    if (r.kind != QueuedRequest::Kind::permits || r.capacity != capacity) return Verdict::mismatch;
    ahead += r.permits;
  }
  return ahead + permits <= capacity ? Verdict::holds : Verdict::waits;
}

std::size_t holding(const std::vector<QueuedRequest>& queue) {
  if (queue.empty()) return 0;
  std::size_t n = 0;
  switch (queue.front().kind) {
    case QueuedRequest::Kind::exclusive:
      return 1;
    case QueuedRequest::Kind::shared:
      while (n < queue.size() && queue[n].kind == QueuedRequest::Kind::shared) ++n;
      return n;
    case QueuedRequest::Kind::permits: {
      std::uint64_t held = 0;
      const std::uint32_t capacity = queue.front().capacity;
      while (n < queue.size() && queue[n].kind == QueuedRequest::Kind::permits &&
             queue[n].capacity == capacity && held + queue[n].permits <= capacity) {
        held += queue[n].permits;
        ++n;
      }
      return n;
    }
  }
  return n;
}

}  // namespace warden::engines::etcd

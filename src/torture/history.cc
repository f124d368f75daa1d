#include "torture/history.h"

#include <algorithm>
#include <array>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string_view>
#include <utility>

namespace warden::torture {
namespace {

struct KindName {
  EventKind kind;
  const char* name;
};

constexpr std::array<KindName, 9> kKindNames = {{
    {EventKind::request, "request"},
    {EventKind::grant, "grant"},
    {EventKind::timeout, "timeout"},
    {EventKind::error, "error"},
    {EventKind::lost, "lost"},
    {EventKind::release, "release"},
    {EventKind::write, "write"},
    {EventKind::fault, "fault"},
    {EventKind::death, "death"},
}};

// The fields an event of a kind carries besides `kind` and `time` (history.h's table).
// A fault's `client` is optional: present only when the fault hit a client.
struct Fields {
  bool client = false;
  bool token = false;
  bool span = false;  // start, end
  bool accepted = false;
  bool fault = false;  // nemesis, target
  bool detail = false;
};

Fields fields_of(EventKind kind) {
  switch (kind) {
    case EventKind::request:
    case EventKind::timeout:
    case EventKind::death:
      return {.client = true};
    case EventKind::grant:
    case EventKind::lost:
    case EventKind::release:
      return {.client = true, .token = true};
    case EventKind::error:
      return {.client = true, .detail = true};
    case EventKind::write:
      return {.client = true, .token = true, .span = true, .accepted = true};
    case EventKind::fault:
      return {.span = true, .fault = true};
  }
  return {};
}

// Reads one line's object; every complaint becomes the caller's "history line N: ...".
class LineReader {
 public:
  explicit LineReader(const nlohmann::json& object) : object_(object) {}

  bool has(const char* name) const { return object_.contains(name); }

  std::int64_t integer(const char* name) const {
    const nlohmann::json& value = field(name);
    // An unsigned literal above INT64_MAX would come back negative.
    if (!value.is_number_integer() ||
        (value.is_number_unsigned() &&
         value.get<std::uint64_t>() > std::uint64_t{std::numeric_limits<std::int64_t>::max()})) {
      throw std::runtime_error(bad(name, "a 64-bit integer"));
    }
    return value.get<std::int64_t>();
  }

  // A client's number. Negative numbers are rejected: write_event leaves a fault's
  // client out when it is negative, so one would not read back the same.
  int client(const char* name) const {
    const std::int64_t value = integer(name);
    if (value < 0 || value > std::numeric_limits<int>::max()) {
      throw std::runtime_error(bad(name, "a client number (0..2147483647)"));
    }
    return static_cast<int>(value);
  }

  std::uint64_t token(const char* name) const {
    const nlohmann::json& value = field(name);
    // nlohmann parses every non-negative integer literal as unsigned.
    if (!value.is_number_unsigned()) {
      throw std::runtime_error(bad(name, "a non-negative integer"));
    }
    return value.get<std::uint64_t>();
  }

  bool boolean(const char* name) const {
    const nlohmann::json& value = field(name);
    if (!value.is_boolean()) throw std::runtime_error(bad(name, "true or false"));
    return value.get<bool>();
  }

  std::string text(const char* name) const {
    const nlohmann::json& value = field(name);
    if (!value.is_string()) throw std::runtime_error(bad(name, "a string"));
    return value.get<std::string>();
  }

 private:
  const nlohmann::json& field(const char* name) const {
    auto it = object_.find(name);
    if (it == object_.end()) {
      throw std::runtime_error(std::string("missing field \"") + name + "\"");
    }
    return *it;
  }

  static std::string bad(const char* name, const char* expected) {
    return std::string("field \"") + name + "\" must be " + expected;
  }

  const nlohmann::json& object_;
};

Event parse_event(std::string_view line) {
  // Parse errors carry nlohmann's own position text ("syntax error while parsing ...").
  nlohmann::json object;
  try {
    object = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::runtime_error(e.what());
  }
  if (!object.is_object()) throw std::runtime_error("not a JSON object");

  const LineReader in(object);
  const std::string kind_text = in.text("kind");
  const std::optional<EventKind> kind = event_kind_from(kind_text);
  if (!kind) throw std::runtime_error("unknown kind \"" + kind_text + "\"");

  Event event;
  event.kind = *kind;
  event.time = in.integer("time");
  const Fields fields = fields_of(*kind);
  if (fields.client || (event.kind == EventKind::fault && in.has("client"))) {
    event.client = in.client("client");
  }
  if (fields.token) event.token = in.token("token");
  if (fields.span) {
    event.start = in.integer("start");
    event.end = in.integer("end");
  }
  if (fields.accepted) event.accepted = in.boolean("accepted");
  if (fields.fault) {
    event.nemesis = in.text("nemesis");
    event.target = in.text("target");
  }
  if (fields.detail) event.detail = in.text("detail");
  return event;
}

}  // namespace

const char* to_string(EventKind kind) {
  for (const KindName& k : kKindNames) {
    if (k.kind == kind) return k.name;
  }
  return "unknown";
}

std::optional<EventKind> event_kind_from(const std::string& text) {
  for (const KindName& k : kKindNames) {
    if (text == k.name) return k.kind;
  }
  return std::nullopt;
}

void write_event(std::ostream& out, const Event& event) {
  // ordered_json keeps the fields in the order written: kind and time first, for a
  // person reading the file.
  nlohmann::ordered_json object;
  object["kind"] = to_string(event.kind);
  object["time"] = event.time;
  const Fields fields = fields_of(event.kind);
  if (fields.client || (event.kind == EventKind::fault && event.client >= 0)) {
    object["client"] = event.client;
  }
  if (fields.token) object["token"] = event.token;
  if (fields.span) {
    object["start"] = event.start;
    object["end"] = event.end;
  }
  if (fields.accepted) object["accepted"] = event.accepted;
  if (fields.fault) {
    object["nemesis"] = event.nemesis;
    object["target"] = event.target;
  }
  if (fields.detail) object["detail"] = event.detail;
  // An error's detail comes from a backend and may not be UTF-8; dump() would throw on
  // it, so invalid bytes become U+FFFD instead.
  out << object.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << '\n';
}

std::vector<Event> read_history(std::istream& in) {
  std::vector<Event> events;
  std::string line;
  for (long number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      events.push_back(parse_event(line));
    } catch (const std::exception& e) {
      throw std::runtime_error("history line " + std::to_string(number) + ": " + e.what());
    }
  }
  return events;
}

std::vector<Event> sorted_by_time(std::vector<Event> events) {
  std::stable_sort(events.begin(), events.end(),
                   [](const Event& a, const Event& b) { return a.time < b.time; });
  return events;
}

}  // namespace warden::torture

// torture/history.h — what a `warden torture` run records, as plain values: every
// client's lock events, every write the resource saw, every fault the nemesis
// injected. Times are nanoseconds on CLOCK_MONOTONIC, which every process on the
// machine shares, so events of the clients, the resource and the nemesis order
// correctly against one another.
//
// A run's history is written as JSON lines (one Event per line, history.jsonl) and read
// back by the checker and the timeline; docs/torture.md lists the fields.
#pragma once

#include <cstdint>
#include <istream>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace warden::torture {

using Nanos = std::int64_t;  // CLOCK_MONOTONIC, nanoseconds

enum class EventKind {
  request,  // client asked for the lock                     (client, time)
  grant,    // client was granted it                          (client, time, token)
  timeout,  // client's wait ended without the lock           (client, time)
  error,    // client's acquire or release failed             (client, time, detail)
  lost,     // client was told its lease was lost             (client, time, token)
  release,  // client released (confirmed by the backend)     (client, time, token)
  write,    // the resource saw a write                       (client, token, start, end, accepted)
  fault,    // the nemesis injected a fault                   (nemesis, target, start, end;
            //                                                  client if it hit a client)
  death,    // a client process died (killed by the nemesis)  (client, time)
};

struct Event {
  EventKind kind = EventKind::request;
  int client = -1;          // -1: not a client's event (a server fault)
  Nanos time = 0;           // when it happened (write, fault: = start)
  std::uint64_t token = 0;  // grant, lost, release, write
  Nanos start = 0;          // write: when the resource took it; fault: when it began
  Nanos end = 0;            // write: when the write ended; fault: when it was undone
  bool accepted = false;    // write: did the FenceGate let it through
  std::string nemesis;      // fault: "pause-holder", ...
  std::string target;       // fault: "client 3", "server 127.0.0.1:7001", ...
  std::string detail;       // error: the message

  bool operator==(const Event&) const = default;
};

const char* to_string(EventKind kind);
std::optional<EventKind> event_kind_from(const std::string& text);

// One JSON object per line. write_event never throws for a valid Event; read_history
// throws std::runtime_error naming the line of a malformed one.
void write_event(std::ostream& out, const Event& event);
std::vector<Event> read_history(std::istream& in);

// Events ordered by time (stable: equal times keep their order).
std::vector<Event> sorted_by_time(std::vector<Event> events);

}  // namespace warden::torture

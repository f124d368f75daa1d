// tests/torture/events.h — hand-written histories read like the runs they stand for:
// times in milliseconds, one helper per event kind with the fields that kind carries.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "torture/history.h"

namespace warden::torture::testing {

constexpr Nanos ms(double milliseconds) { return static_cast<Nanos>(milliseconds * 1e6); }

inline Event client_event(EventKind kind, int client, double at) {
  Event e;
  e.kind = kind;
  e.client = client;
  e.time = ms(at);
  return e;
}

inline Event request(int client, double at) { return client_event(EventKind::request, client, at); }
inline Event timeout(int client, double at) { return client_event(EventKind::timeout, client, at); }
inline Event death(int client, double at) { return client_event(EventKind::death, client, at); }

inline Event error(int client, double at, std::string detail) {
  Event e = client_event(EventKind::error, client, at);
  e.detail = std::move(detail);
  return e;
}

inline Event with_token(EventKind kind, int client, double at, std::uint64_t token) {
  Event e = client_event(kind, client, at);
  e.token = token;
  return e;
}
inline Event grant(int client, double at, std::uint64_t token) {
  return with_token(EventKind::grant, client, at, token);
}
inline Event lost(int client, double at, std::uint64_t token) {
  return with_token(EventKind::lost, client, at, token);
}
inline Event release(int client, double at, std::uint64_t token) {
  return with_token(EventKind::release, client, at, token);
}

inline Event write(int client, std::uint64_t token, double from, double to, bool accepted) {
  Event e = with_token(EventKind::write, client, from, token);
  e.start = ms(from);
  e.end = ms(to);
  e.accepted = accepted;
  return e;
}

// A fault on `client` (-1: on a server).
inline Event fault(std::string nemesis, std::string target, int client, double from, double to) {
  Event e = client_event(EventKind::fault, client, from);
  e.start = ms(from);
  e.end = ms(to);
  e.nemesis = std::move(nemesis);
  e.target = std::move(target);
  return e;
}

}  // namespace warden::torture::testing

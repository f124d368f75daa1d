// engines/resp_client/cluster_slots.h — where a key lives in a Redis Cluster.
//
// Map of the file:
//   key_slot()            the slot of a key (CRC16 of the key or of its hash tag)
//   parse_cluster_slots() the reply of CLUSTER SLOTS as validated slot ranges
//   parse_redirect()      a MOVED or ASK error reply as a Redirect
//   SlotMap               slot -> master endpoint, updated by MOVED
//
// Everything here is pure: no I/O, no clock, no threads. The parsers read what a
// server sent, so a malformed reply throws Error(internal) with a message that names
// what was wrong; it never crashes and never yields a half-valid result.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engines/resp_client/reply.h"

namespace warden::engines::resp_client {

// A Redis Cluster has this many hash slots, numbered 0 .. kClusterSlots - 1.
inline constexpr std::uint16_t kClusterSlots = 16384;

// The hash slot of `key`: CRC16 (XMODEM: polynomial 0x1021, initial value 0, no
// reflection) modulo 16384. When the key holds a '{' followed later by a '}' with at
// least one byte between them (the first '{' and the first '}' after it), only those
// bytes are hashed, so "{user1000}.following" and "{user1000}.followers" share a slot.
// "{}" (empty tag) and an unclosed '{' hash the whole key. Any bytes, NUL included.
std::uint16_t key_slot(std::string_view key);

// A node's address as a cluster reports it. `host` is an IP address or a hostname
// (IPv6 without brackets: "::1").
struct Endpoint {
  std::string host;
  std::uint16_t port = 0;

  // "host:port", or "[host]:port" when the host holds a ':' (IPv6).
  std::string to_string() const;
  friend bool operator==(const Endpoint&, const Endpoint&) = default;
  friend auto operator<=>(const Endpoint&, const Endpoint&) = default;
};

// Slots first..last (both included) served by the master at host:port.
struct SlotRange {
  std::uint16_t first = 0;
  std::uint16_t last = 0;
  std::string host;
  std::uint16_t port = 0;

  Endpoint endpoint() const { return Endpoint{host, port}; }
  friend bool operator==(const SlotRange&, const SlotRange&) = default;
};

// The masters' slot ranges from a CLUSTER SLOTS reply, sorted by `first`. Each entry
// of the reply is [first, last, [host, port, id, ...], replica...]; replicas and any
// field past the port are ignored. The reply may leave slots uncovered (a cluster that
// lost a master), but ranges never overlap.
//
// A master whose host is the empty string means "the node you asked" (Redis 7 with
// cluster-announce-hostname or an unknown preferred endpoint): `asked_host` stands in
// for it; when `asked_host` is empty too, that is an error.
//
// Throws Error(internal) when the reply is not an array of such entries: a range out
// of 0..16383 or reversed, overlapping ranges, a host that is not a string or is "?"
// (unknown endpoint), a port outside 1..65535.
std::vector<SlotRange> parse_cluster_slots(const Reply& reply, std::string_view asked_host = {});

// A redirection in a cluster's error reply: MOVED (the slot lives elsewhere now; update
// the map) or ASK (during a migration: send this one command, preceded by ASKING, to the
// target; the map is unchanged).
struct Redirect {
  enum Kind : std::uint8_t { moved, ask };

  Kind kind = moved;
  std::uint16_t slot = 0;
  // May be empty: Redis then means "the host you asked, on this port".
  std::string host;
  std::uint16_t port = 0;

  Endpoint endpoint() const { return Endpoint{host, port}; }
  friend bool operator==(const Redirect&, const Redirect&) = default;
};

// The redirect in an error reply's text ("MOVED 3999 127.0.0.1:6381",
// "ASK 3999 [::1]:6381", "ASK 3999 ::1:6381"), as Reply::text holds it (no leading
// '-'). nullopt for every other error ("ERR ...", "TRYAGAIN ...", "MOVEDX ...").
// Throws Error(internal) when the code word is MOVED or ASK but the rest is not a slot
// in 0..16383 and an endpoint with a port in 1..65535.
std::optional<Redirect> parse_redirect(std::string_view error_message);

// Which master serves each slot, as far as this client knows. Not thread-safe: callers
// that share one guard it themselves.
class SlotMap {
 public:
  // Every slot unknown.
  SlotMap();
  // From parse_cluster_slots' ranges. Throws Error(internal) for a range out of
  // 0..16383 or reversed, a port of 0, or ranges that overlap (the map is then not
  // built).
  explicit SlotMap(const std::vector<SlotRange>& ranges);

  // The master serving `slot`; nullopt when no range covered it. Throws
  // Error(invalid_argument) for a slot past 16383.
  std::optional<Endpoint> endpoint_for(std::uint16_t slot) const;

  // Applies a redirect: MOVED makes `redirect.endpoint()` the master of
  // `redirect.slot` and returns true if that changed the map; ASK changes nothing (it
  // holds for one command only) and returns false. Throws Error(internal), changing
  // nothing, for a slot past 16383, an empty host or a port of 0 (resolve Redis'
  // empty host to the asked node's host first).
  bool apply(const Redirect& redirect);

  // Every master that serves at least one slot, sorted, without repeats.
  std::vector<Endpoint> nodes() const;

  // Slots no range covers (0 for a healthy cluster's map).
  std::size_t uncovered() const;

 private:
  static constexpr std::uint16_t kNone = 0xFFFF;

  // The index of `endpoint` in endpoints_, appended if new.
  std::uint16_t index_of(const Endpoint& endpoint);

  // slot -> index into endpoints_, kNone when unknown. Endpoints are only appended, so
  // an index stays valid; nodes() leaves out those no slot points to any more.
  std::array<std::uint16_t, kClusterSlots> slots_;
  std::vector<Endpoint> endpoints_;
};

}  // namespace warden::engines::resp_client

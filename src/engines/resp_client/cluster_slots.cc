#include "engines/resp_client/cluster_slots.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include "warden/error.h"

namespace warden::engines::resp_client {
namespace {

// CRC16/XMODEM of `bytes`, bit by bit from the definition: shift each message bit
// (most significant first) into a 16-bit register, and XOR the polynomial 0x1021 in
// whenever a 1 falls out of the top. A table would be faster; key_slot runs once per
// command on short keys, where this does not matter.
std::uint16_t crc16_xmodem(std::string_view bytes) {
  std::uint16_t crc = 0;
  for (const char c : bytes) {
    crc ^= static_cast<std::uint16_t>(static_cast<unsigned char>(c) << 8);
    for (int bit = 0; bit < 8; ++bit) {
      const bool top = (crc & 0x8000) != 0;
      crc = static_cast<std::uint16_t>(crc << 1);
      if (top) crc ^= 0x1021;
    }
  }
  return crc;
}

[[noreturn]] void malformed_slots(const Reply& reply, const std::string& what) {
  throw Error(Errc::internal,
              "malformed CLUSTER SLOTS reply: " + what + " (reply: " + reply.describe() + ")");
}

[[noreturn]] void malformed_redirect(std::string_view message, const std::string& what) {
  throw Error(Errc::internal, "malformed cluster redirect \"" +
                                  std::string(message.substr(0, 200)) + "\": " + what);
}

// A decimal number in [lo, hi] that is all of `text` (no sign, no spaces); nullopt
// otherwise.
std::optional<std::uint32_t> parse_number(std::string_view text, std::uint32_t lo,
                                          std::uint32_t hi) {
  std::uint32_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < lo || value > hi) {
    return std::nullopt;
  }
  return value;
}

// A slot number (integer reply) of CLUSTER SLOTS.
std::uint16_t slot_of(const Reply& reply, const Reply& field, const std::string& where) {
  if (!field.is_integer() || field.integer < 0 || field.integer >= kClusterSlots) {
    malformed_slots(reply, where + " is not a slot in 0..16383");
  }
  return static_cast<std::uint16_t>(field.integer);
}

// Sorts `ranges` by first slot and throws (through `fail`) if two of them overlap.
template <class Fail>
void sort_and_check_overlap(std::vector<SlotRange>& ranges, Fail fail) {
  std::sort(ranges.begin(), ranges.end(),
            [](const SlotRange& a, const SlotRange& b) { return a.first < b.first; });
  for (std::size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first <= ranges[i - 1].last) {
      fail("slots " + std::to_string(ranges[i - 1].first) + "-" +
           std::to_string(ranges[i - 1].last) + " and " + std::to_string(ranges[i].first) + "-" +
           std::to_string(ranges[i].last) + " overlap");
    }
  }
}

}  // namespace

std::uint16_t key_slot(std::string_view key) {
  if (const auto open = key.find('{'); open != std::string_view::npos) {
    const auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return static_cast<std::uint16_t>(crc16_xmodem(key) % kClusterSlots);
}

std::string Endpoint::to_string() const {
  const std::string port_text = std::to_string(port);
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + port_text;
  return host + ":" + port_text;
}

std::vector<SlotRange> parse_cluster_slots(const Reply& reply, std::string_view asked_host) {
  if (!reply.is_array()) malformed_slots(reply, "not an array");
  std::vector<SlotRange> ranges;
  ranges.reserve(reply.elements.size());
  for (std::size_t i = 0; i < reply.elements.size(); ++i) {
    const Reply& entry = reply.elements[i];
    const std::string where = "entry " + std::to_string(i);
    if (!entry.is_array() || entry.elements.size() < 3) {
      malformed_slots(reply, where + " is not [first, last, master, ...]");
    }
    SlotRange range;
    range.first = slot_of(reply, entry.elements[0], where + " first slot");
    range.last = slot_of(reply, entry.elements[1], where + " last slot");
    if (range.first > range.last) malformed_slots(reply, where + " has first slot > last slot");

    const Reply& master = entry.elements[2];
    if (!master.is_array() || master.elements.size() < 2) {
      malformed_slots(reply, where + " master is not [host, port, ...]");
    }
    const Reply& host = master.elements[0];
    if (host.type != Reply::Type::bulk && host.type != Reply::Type::status) {
      malformed_slots(reply, where + " master host is not a string");
    }
    if (host.text == "?") malformed_slots(reply, where + " master endpoint is unknown (\"?\")");
    if (host.text.empty() && asked_host.empty()) {
      malformed_slots(reply, where + " master host is empty and the asked node's host unknown");
    }
    range.host = host.text.empty() ? std::string(asked_host) : host.text;
    const Reply& port = master.elements[1];
    if (!port.is_integer() || port.integer < 1 ||
        port.integer > std::numeric_limits<std::uint16_t>::max()) {
      malformed_slots(reply, where + " master port is not in 1..65535");
    }
    range.port = static_cast<std::uint16_t>(port.integer);
    ranges.push_back(std::move(range));
  }
  sort_and_check_overlap(ranges, [&](const std::string& what) { malformed_slots(reply, what); });
  return ranges;
}

std::optional<Redirect> parse_redirect(std::string_view message) {
  Redirect redirect;
  std::string_view rest;
  if (message.starts_with("MOVED ")) {
    redirect.kind = Redirect::moved;
    rest = message.substr(6);
  } else if (message.starts_with("ASK ")) {
    redirect.kind = Redirect::ask;
    rest = message.substr(4);
  } else if (message == "MOVED" || message == "ASK") {
    malformed_redirect(message, "no slot and endpoint");
  } else {
    return std::nullopt;
  }

  const auto space = rest.find(' ');
  if (space == std::string_view::npos) malformed_redirect(message, "no endpoint after the slot");
  const auto slot = parse_number(rest.substr(0, space), 0, kClusterSlots - 1);
  if (!slot) malformed_redirect(message, "the slot is not a number in 0..16383");
  redirect.slot = static_cast<std::uint16_t>(*slot);

  const std::string_view endpoint = rest.substr(space + 1);
  // Redis writes "ip:port" even for IPv6 ("::1:6381"), so the port follows the last
  // ':'; "[::1]:6381" is accepted too.
  const auto colon = endpoint.rfind(':');
  if (colon == std::string_view::npos) malformed_redirect(message, "the endpoint has no port");
  std::string_view host = endpoint.substr(0, colon);
  if (host.starts_with('[') || host.ends_with(']')) {
    if (host.size() < 2 || !host.starts_with('[') || !host.ends_with(']')) {
      malformed_redirect(message, "unbalanced brackets around the host");
    }
    host = host.substr(1, host.size() - 2);
  }
  if (host.find_first_of(" []") != std::string_view::npos) {
    malformed_redirect(message, "the host holds a space or a bracket");
  }
  const auto port = parse_number(endpoint.substr(colon + 1), 1, 65535);
  if (!port) malformed_redirect(message, "the port is not a number in 1..65535");
  redirect.host = std::string(host);
  redirect.port = static_cast<std::uint16_t>(*port);
  return redirect;
}

SlotMap::SlotMap() { slots_.fill(kNone); }

SlotMap::SlotMap(const std::vector<SlotRange>& given) : SlotMap() {
  std::vector<SlotRange> ranges = given;
  const auto fail = [](const std::string& what) {
    throw Error(Errc::internal, "bad cluster slot ranges: " + what);
  };
  for (const SlotRange& r : ranges) {
    if (r.first > r.last || r.last >= kClusterSlots) {
      fail("range " + std::to_string(r.first) + "-" + std::to_string(r.last) +
           " is not within 0..16383");
    }
    if (r.host.empty() || r.port == 0) {
      fail("range " + std::to_string(r.first) + "-" + std::to_string(r.last) +
           " has no host or port 0");
    }
  }
  sort_and_check_overlap(ranges, fail);
  for (const SlotRange& r : ranges) {
    const std::uint16_t index = index_of(r.endpoint());
    std::fill(slots_.begin() + r.first, slots_.begin() + r.last + 1, index);
  }
}

std::uint16_t SlotMap::index_of(const Endpoint& endpoint) {
  const auto it = std::find(endpoints_.begin(), endpoints_.end(), endpoint);
  if (it != endpoints_.end()) return static_cast<std::uint16_t>(it - endpoints_.begin());
  // At most one endpoint per slot is ever referenced, and unreferenced ones are reused
  // before the table grows, so it never reaches kNone entries.
  for (std::size_t i = 0; i < endpoints_.size(); ++i) {
    if (std::find(slots_.begin(), slots_.end(), static_cast<std::uint16_t>(i)) == slots_.end()) {
      endpoints_[i] = endpoint;
      return static_cast<std::uint16_t>(i);
    }
  }
  endpoints_.push_back(endpoint);
  return static_cast<std::uint16_t>(endpoints_.size() - 1);
}

std::optional<Endpoint> SlotMap::endpoint_for(std::uint16_t slot) const {
  if (slot >= kClusterSlots) {
    throw Error(Errc::invalid_argument,
                "cluster slot " + std::to_string(slot) + " is not in 0..16383");
  }
  const std::uint16_t index = slots_[slot];
  if (index == kNone) return std::nullopt;
  return endpoints_[index];
}

bool SlotMap::apply(const Redirect& redirect) {
  if (redirect.slot >= kClusterSlots || redirect.host.empty() || redirect.port == 0) {
    throw Error(Errc::internal, "cannot apply cluster redirect to slot " +
                                    std::to_string(redirect.slot) + " at \"" +
                                    redirect.endpoint().to_string() + "\"");
  }
  if (redirect.kind == Redirect::ask) return false;
  const std::uint16_t before = slots_[redirect.slot];
  if (before != kNone && endpoints_[before] == redirect.endpoint()) return false;
  // Unhook the slot first, so index_of may reuse the entry it pointed to.
  slots_[redirect.slot] = kNone;
  slots_[redirect.slot] = index_of(redirect.endpoint());
  return true;
}

std::vector<Endpoint> SlotMap::nodes() const {
  std::vector<bool> used(endpoints_.size(), false);
  for (const std::uint16_t index : slots_) {
    if (index != kNone) used[index] = true;
  }
  std::vector<Endpoint> out;
  for (std::size_t i = 0; i < endpoints_.size(); ++i) {
    if (used[i]) out.push_back(endpoints_[i]);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::size_t SlotMap::uncovered() const {
  return static_cast<std::size_t>(std::count(slots_.begin(), slots_.end(), kNone));
}

}  // namespace warden::engines::resp_client

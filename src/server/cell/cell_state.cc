#include "server/cell/cell_state.h"

#include <cstdio>
#include <cstdlib>
#include <set>
#include <span>
#include <utility>

#include "warden/error.h"

namespace warden::server::cell {
namespace {

constexpr std::uint8_t kChanges = 1;
// The longest hold a grant can carry (a 7-day lease and a 1-hour lock-delay): what the
// snapshot encoding is told, so it checks every field against the request limits.
constexpr std::uint64_t kMaxHoldMs = (7ull * 24 * 3600 + 3600) * 1000;

[[noreturn]] void damaged(const std::string& why) {
  throw Error(Errc::internal, "cell entry is damaged: " + why);
}

void put(std::string& out, const void* data, std::size_t n) {
  out.append(static_cast<const char*>(data), n);
}

template <typename Int>
void put_int(std::string& out, Int v) {
  unsigned char bytes[sizeof(Int)];
  for (std::size_t i = 0; i < sizeof(Int); ++i) bytes[i] = static_cast<unsigned char>(v >> (8 * i));
  put(out, bytes, sizeof bytes);
}

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <typename Int>
  Int get() {
    const std::string_view b = take(sizeof(Int));
    Int v = 0;
    for (std::size_t i = 0; i < sizeof(Int); ++i) {
      v |= static_cast<Int>(static_cast<unsigned char>(b[i])) << (8 * i);
    }
    return v;
  }
  std::string_view take(std::size_t n) {
    if (n > in_.size()) damaged("it ends early");
    const std::string_view out = in_.substr(0, n);
    in_.remove_prefix(n);
    return out;
  }
  bool done() const { return in_.empty(); }
  std::size_t left() const { return in_.size(); }

 private:
  std::string_view in_;
};

}  // namespace

std::string encode_changes(const CellChanges& changes) {
  std::string out;
  put_int<std::uint8_t>(out, kChanges);
  put_int<std::uint64_t>(out, changes.token_floor);
  put_int<std::uint32_t>(out, static_cast<std::uint32_t>(changes.keys.size()));
  for (const std::string& key : changes.keys) {
    put_int<std::uint16_t>(out, static_cast<std::uint16_t>(key.size()));
    out += key;
  }
  TableSnapshot held;
  held.state = StateRecord{changes.token_floor, kMaxHoldMs};
  held.holders = changes.holders;
  held.delays = changes.delays;
  const std::vector<std::byte> table = encode_table_snapshot(held);
  put_int<std::uint32_t>(out, static_cast<std::uint32_t>(table.size()));
  put(out, table.data(), table.size());
  return out;
}

CellChanges decode_changes(std::string_view entry) {
  Reader r(entry);
  if (const auto kind = r.get<std::uint8_t>(); kind != kChanges) {
    damaged("unknown kind " + std::to_string(kind));
  }
  CellChanges c;
  c.token_floor = r.get<std::uint64_t>();
  const auto count = r.get<std::uint32_t>();
  if (count > r.left() / 2) damaged("it counts more keys than it holds");
  std::set<std::string_view> named;
  c.keys.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    c.keys.emplace_back(r.take(r.get<std::uint16_t>()));
    if (!named.insert(c.keys.back()).second) damaged("key '" + c.keys.back() + "' twice");
  }
  const std::string_view table = r.take(r.get<std::uint32_t>());
  if (!r.done()) damaged("bytes after its end");
  TableSnapshot held;
  try {
    held = decode_table_snapshot(std::as_bytes(std::span<const char>(table.data(), table.size())),
                                 "cell entry");
  } catch (const Error& e) {
    damaged(e.what());
  }
  if (held.state.reserved_upto != c.token_floor) damaged("its holders' token floor differs");
  for (const SnapshotHolder& h : held.holders) {
    if (!named.contains(h.key)) damaged("a holder of key '" + h.key + "' it does not name");
  }
  for (const SnapshotDelay& d : held.delays) {
    if (!named.contains(d.key)) damaged("a lock-delay of key '" + d.key + "' it does not name");
  }
  c.holders = std::move(held.holders);
  c.delays = std::move(held.delays);
  return c;
}

void CellState::apply(std::string_view entry, std::uint64_t index) {
  try {
    replace(decode_changes(entry));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "wardend: cell: entry %llu cannot be applied (%s); stopping\n",
                 static_cast<unsigned long long>(index), e.what());
    std::abort();
  }
}

void CellState::replace(const CellChanges& changes) {
  const std::lock_guard lock(mutex_);
  if (changes.token_floor > token_floor_) token_floor_ = changes.token_floor;
  for (const std::string& key : changes.keys) keys_.erase(key);
  for (const SnapshotHolder& h : changes.holders) keys_[h.key].holders.push_back(h);
  for (const SnapshotDelay& d : changes.delays) keys_[d.key].delays.push_back(d);
}

std::string CellState::snapshot() {
  CellChanges all;
  {
    const std::lock_guard lock(mutex_);
    all.token_floor = token_floor_;
    for (const auto& [key, held] : keys_) {
      all.keys.push_back(key);
      all.holders.insert(all.holders.end(), held.holders.begin(), held.holders.end());
      all.delays.insert(all.delays.end(), held.delays.begin(), held.delays.end());
    }
  }
  return encode_changes(all);
}

void CellState::restore(std::string_view state) {
  CellChanges all = decode_changes(state);
  {
    const std::lock_guard lock(mutex_);
    keys_.clear();
    token_floor_ = 0;
  }
  replace(all);
}

TableSnapshot CellState::held() const {
  const std::lock_guard lock(mutex_);
  TableSnapshot out;
  out.state = StateRecord{token_floor_, kMaxHoldMs};
  for (const auto& [key, held] : keys_) {
    out.holders.insert(out.holders.end(), held.holders.begin(), held.holders.end());
    out.delays.insert(out.delays.end(), held.delays.begin(), held.delays.end());
  }
  return out;
}

std::size_t CellState::keys() const {
  const std::lock_guard lock(mutex_);
  return keys_.size();
}

}  // namespace warden::server::cell

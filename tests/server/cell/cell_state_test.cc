// tests/server/cell/cell_state_test.cc — what every member of a cell holds: a turn's
// changes encoded and decoded exactly, damage refused, entries applied key by key, a
// member's snapshot restoring the same grants; and the --cell member list.
#include "server/cell/cell_state.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/cell/cell_member.h"
#include "warden/error.h"

namespace warden::server::cell {
namespace {

SnapshotHolder holder(std::string key, std::uint64_t token, Mode mode = Mode::exclusive) {
  SnapshotHolder h;
  h.key = std::move(key);
  h.mode = mode;
  h.token = token;
  h.secret.fill(static_cast<unsigned char>(token));
  h.ttl_ms = 30'000;
  return h;
}

CellChanges sample() {
  CellChanges c;
  c.token_floor = 9;
  c.keys = {"g/lock", "g/shared", "g/sem", "g/leader", "g/delayed", "g/released"};
  c.holders.push_back(holder("g/lock", 3));
  c.holders.push_back(holder("g/shared", 4, Mode::shared));
  c.holders.push_back(holder("g/shared", 5, Mode::shared));
  SnapshotHolder sem = holder("g/sem", 6, Mode::shared);
  sem.capacity = 3;
  sem.permits = 2;
  c.holders.push_back(sem);
  SnapshotHolder leader = holder("g/leader", 9);
  leader.value = "node-a";
  leader.lock_delay_ms = 500;
  c.holders.push_back(leader);
  c.delays.push_back(SnapshotDelay{"g/delayed", 1'500});
  return c;
}

TEST(CellChanges, EncodeDecodeGivesTheSameChanges) {
  EXPECT_EQ(decode_changes(encode_changes(sample())), sample());
  const CellChanges empty;
  EXPECT_EQ(decode_changes(encode_changes(empty)), empty);
}

TEST(CellChanges, DamageIsRefused) {
  const std::string good = encode_changes(sample());
  for (std::size_t n = 0; n < good.size(); ++n) {
    EXPECT_THROW(decode_changes(good.substr(0, n)), Error) << "cut to " << n << " bytes";
  }
  EXPECT_THROW(decode_changes(good + "x"), Error);
  std::string kind = good;
  kind[0] = 2;
  EXPECT_THROW(decode_changes(kind), Error);
  std::string flipped = good;
  flipped[flipped.size() - 10] ^= 1;  // inside the holders: their checksum no longer matches
  EXPECT_THROW(decode_changes(flipped), Error);

  CellChanges unnamed = sample();
  unnamed.keys.erase(unnamed.keys.begin());  // g/lock's holder, its key not named
  EXPECT_THROW(decode_changes(encode_changes(unnamed)), Error);
  CellChanges delay_unnamed = sample();
  delay_unnamed.keys.erase(delay_unnamed.keys.begin() + 4);
  EXPECT_THROW(decode_changes(encode_changes(delay_unnamed)), Error);
  CellChanges twice = sample();
  twice.keys.push_back("g/lock");
  EXPECT_THROW(decode_changes(encode_changes(twice)), Error);
  CellChanges above = sample();
  above.token_floor = 8;  // a holder's token 9 above the floor
  EXPECT_THROW(decode_changes(encode_changes(above)), Error);
}

TEST(CellState, EntriesReplaceTheKeysTheyNameAndNothingElse) {
  CellState state;
  state.apply(encode_changes(sample()), 1);
  EXPECT_EQ(state.keys(), 5u);  // g/released holds nothing

  CellChanges next;
  next.token_floor = 12;
  next.keys = {"g/lock", "g/shared"};
  next.holders.push_back(holder("g/lock", 12));  // released 3, then granted 12
  state.apply(encode_changes(next), 2);

  const TableSnapshot held = state.held();
  EXPECT_EQ(held.state.reserved_upto, 12u);
  EXPECT_EQ(state.keys(), 4u);  // g/shared released by both holders
  std::vector<std::uint64_t> tokens;
  for (const SnapshotHolder& h : held.holders) tokens.push_back(h.token);
  std::sort(tokens.begin(), tokens.end());
  EXPECT_EQ(tokens, (std::vector<std::uint64_t>{6, 9, 12}));
  ASSERT_EQ(held.delays.size(), 1u);
  EXPECT_EQ(held.delays[0], (SnapshotDelay{"g/delayed", 1'500}));
}

TEST(CellState, ASnapshotRestoresTheSameGrantsOnAnotherMember) {
  CellState first;
  first.apply(encode_changes(sample()), 1);
  CellState second;
  CellChanges stale;
  stale.token_floor = 2;
  stale.keys = {"g/other"};
  stale.holders.push_back(holder("g/other", 2));
  second.apply(encode_changes(stale), 1);
  second.restore(first.snapshot());
  EXPECT_EQ(second.held(), first.held());
  EXPECT_THROW(second.restore("not a snapshot"), Error);
}

TEST(CellMembers, AListParsesAndEachDefectIsNamed) {
  const auto members = parse_cell_members("1@127.0.0.1:7380,2@127.0.0.2:7390,7@10.0.0.1:1");
  ASSERT_EQ(members.size(), 3u);
  EXPECT_EQ(members[1].id, 2u);
  EXPECT_EQ(members[1].client_address(), "127.0.0.2:7390");
  EXPECT_EQ(members[1].bus_address(), "127.0.0.2:7391");
  EXPECT_EQ(members[2].id, 7u);

  auto message = [](const std::string& text) {
    try {
      parse_cell_members(text);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << text;
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message("").find("no members"), std::string::npos);
  EXPECT_NE(message("127.0.0.1:7380").find("is not id@"), std::string::npos);
  EXPECT_NE(message("0@127.0.0.1:7380").find("the id must be"), std::string::npos);
  EXPECT_NE(message("x@127.0.0.1:7380").find("the id must be"), std::string::npos);
  EXPECT_NE(message("1@localhost:7380").find("not an IPv4 address"), std::string::npos);
  EXPECT_NE(message("1@::1:7380").find("not an IPv4 address"), std::string::npos);
  EXPECT_NE(message("1@127.0.0.1").find("no port"), std::string::npos);
  EXPECT_NE(message("1@127.0.0.1:65535").find("the port must be"), std::string::npos);
  EXPECT_NE(message("1@127.0.0.1:0").find("the port must be"), std::string::npos);
  EXPECT_NE(message("1@127.0.0.1:1,1@127.0.0.2:1").find("given twice"), std::string::npos);
  EXPECT_NE(message("1@127.0.0.1:1,").find("missing after"), std::string::npos);
}

}  // namespace
}  // namespace warden::server::cell

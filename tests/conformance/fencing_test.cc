// Conformance: fencing tokens, sequencers and check (DESIGN §2 "Fencing token").
#include <algorithm>
#include <cstdint>
#include <string>

#include "conformance/conformance_suite.h"
#include "warden/fence_gate.h"
#include "warden/sequencer.h"

namespace warden::conformance {
namespace {

TEST_P(Conformance, TokensOfSuccessiveGrantsStrictlyIncreaseSharedGrantsIncluded) {
  Client a = open_client();
  Client b = open_client();
  const bool shared = capabilities().shared;
  std::uint64_t last = 0;
  for (int round = 0; round < 8; ++round) {
    Client& writer = round % 2 == 0 ? a : b;
    {
      Lease lease = writer.lock(group(), "x").acquire(Mode::exclusive, Wait::up_to(kPatience));
      ASSERT_TRUE(lease);
      EXPECT_GT(lease.token(), last) << "exclusive grant in round " << round;
      last = lease.token();
    }
    if (!shared) continue;
    // Two shared grants held together: each is a grant of its own and draws its own
    // token from the lock's one sequence.
    Lease r1 = a.lock(group(), "x").acquire(Mode::shared, Wait::up_to(kPatience));
    Lease r2 = b.lock(group(), "x").acquire(Mode::shared, Wait::up_to(kPatience));
    ASSERT_TRUE(r1);
    ASSERT_TRUE(r2);
    EXPECT_GT(r1.token(), last) << "shared grant in round " << round;
    EXPECT_GT(r2.token(), r1.token()) << "shared grant in round " << round;
    last = std::max(r1.token(), r2.token());
  }
}

TEST_P(Conformance, SequencerNamesTheGrantAndRoundTrips) {
  Client a = open_client();
  // A name with '/' and ':' in it still parses back unambiguously.
  const std::string name = "orders/42:v2 x";
  Lease lease = a.lock(group(), name).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  EXPECT_EQ(lease.group(), group());
  EXPECT_EQ(lease.name(), name);

  const Sequencer seq = lease.sequencer();
  EXPECT_EQ(seq.group, group());
  EXPECT_EQ(seq.name, name);
  EXPECT_EQ(seq.mode, Mode::exclusive);
  EXPECT_EQ(seq.token, lease.token());
  EXPECT_EQ(seq.str(), group() + "/" + name + ":exclusive:" + std::to_string(lease.token()));
  EXPECT_EQ(Sequencer::parse(seq.str()), seq);
  lease.release();

  if (!capabilities().shared) return;
  Lease reader = a.lock(group(), name).acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(reader);
  const Sequencer shared_seq = reader.sequencer();
  EXPECT_EQ(shared_seq.mode, Mode::shared);
  EXPECT_EQ(shared_seq.str(), group() + "/" + name + ":shared:" + std::to_string(reader.token()));
  EXPECT_EQ(Sequencer::parse(shared_seq.str()), shared_seq);
}

// The fencing contract across an unlock() and the next acquire by the same client: once
// the later hold's write was admitted, a write fenced by the earlier hold (delayed: a
// timed-out request, another thread) is rejected. On a cached instance the later hold
// comes from the client's cache with the same token, and its reuse tells it apart.
TEST_P(Conformance, AWriteOfAnEarlierHoldIsRejectedOnceTheNextHoldOfTheClientWrote) {
  Client a = open_client();
  FenceGate gate;
  Sequencer earlier;
  {
    Lease first = a.lock(group(), "x").acquire(Mode::exclusive, Wait::none());
    ASSERT_TRUE(first);
    earlier = first.sequencer();
    EXPECT_EQ(earlier.reuse, first.reuse());
    EXPECT_TRUE(gate.admit(earlier));
  }  // unlocked: a cached instance keeps the grant
  Lease next = a.lock(group(), "x").acquire(Mode::exclusive, Wait::up_to(kPatience));
  ASSERT_TRUE(next);
  const Sequencer later = next.sequencer();
  if (caching()) {
    EXPECT_EQ(later.token, earlier.token) << "not served from the client's cache";
    EXPECT_EQ(later.reuse, earlier.reuse + 1);
  }
  EXPECT_TRUE(gate.admit(later));
  EXPECT_FALSE(gate.admit(earlier)) << "a write of the earlier hold " << earlier.str()
                                    << " was admitted after the later hold's " << later.str();
  EXPECT_FALSE(gate.admit(Sequencer::parse(earlier.str()))) << "the text form lost the order";
  EXPECT_TRUE(gate.admit(Sequencer::parse(later.str())));
  if (capabilities().check) EXPECT_TRUE(a.check(later)) << "check answers for the grant";
}

TEST_P(Conformance, CheckIsTrueWhileHeldAndFalseAfterRelease) {
  WARDEN_SKIP_UNLESS(check);
  Client a = open_client();
  Client observer = open_client();
  Lease lease = a.lock(group(), "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  const Sequencer seq = lease.sequencer();

  EXPECT_TRUE(a.check(seq));
  EXPECT_TRUE(observer.check(seq)) << "any client may check a sequencer";
  EXPECT_TRUE(observer.check(seq.str()));

  Sequencer wrong_token = seq;
  wrong_token.token = seq.token + 1;
  EXPECT_FALSE(observer.check(wrong_token));
  Sequencer wrong_name = seq;
  wrong_name.name = "y";
  EXPECT_FALSE(observer.check(wrong_name));

  lease.release();
  EXPECT_FALSE(observer.check(seq));
  EXPECT_FALSE(observer.check(seq.str()));

  // A later grant of the same lock does not revive the old sequencer.
  Lease next = observer.lock(group(), "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(next);
  EXPECT_FALSE(a.check(seq));
  EXPECT_TRUE(a.check(next.sequencer()));
}

TEST_P(Conformance, CheckOfSharedGrantIsTrueWhileHeld) {
  WARDEN_SKIP_UNLESS(check);
  WARDEN_SKIP_UNLESS(shared);
  Client a = open_client();
  Client b = open_client();
  Lease first = a.lock(group(), "x").acquire(Mode::shared, Wait::none());
  Lease second = b.lock(group(), "x").acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(first);
  ASSERT_TRUE(second);
  const Sequencer first_seq = first.sequencer();
  const Sequencer second_seq = second.sequencer();
  EXPECT_TRUE(b.check(first_seq));
  EXPECT_TRUE(a.check(second_seq));
  first.release();
  EXPECT_FALSE(b.check(first_seq));
  EXPECT_TRUE(a.check(second_seq)) << "one reader's release ended another's grant";
}

TEST_P(Conformance, SequencerWithTheOtherModeDoesNotCheck) {
  WARDEN_SKIP_UNLESS(check);
  Client a = open_client();
  Client observer = open_client();
  {
    Lease writer = a.lock(group(), "x").acquire(Mode::exclusive, Wait::none());
    ASSERT_TRUE(writer);
    const Sequencer real = writer.sequencer();
    Sequencer other = real;
    other.mode = Mode::shared;
    EXPECT_TRUE(observer.check(real));
    EXPECT_FALSE(observer.check(other)) << "an exclusive grant checked as shared";
    EXPECT_FALSE(observer.check(other.str()));
  }
  if (!capabilities().shared) return;  // no shared grant to turn into an exclusive one
  Lease reader = a.lock(group(), "x").acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(reader);
  const Sequencer real = reader.sequencer();
  Sequencer other = real;
  other.mode = Mode::exclusive;
  EXPECT_TRUE(observer.check(real));
  EXPECT_FALSE(observer.check(other)) << "a shared grant checked as exclusive";
  EXPECT_FALSE(observer.check(other.str()));
}

TEST_P(Conformance, LateWriterWithLostLeaseIsRejectedByFenceGate) {
  Client paused = open_client_without_renewals();
  Client next = open_client();
  const LockOptions short_lease = lock_options_with_ttl(300ms);

  Lease old_lease = paused.lock(group(), "x", short_lease).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(old_lease);
  FenceGate gate;
  const std::string key = group() + "/x";
  EXPECT_TRUE(gate.admit(old_lease.sequencer()));

  // The holder "pauses"; its lease runs out and the next holder writes.
  Lease new_lease = next.lock(group(), "x").acquire(Mode::exclusive, Wait::up_to(kPatience));
  ASSERT_TRUE(new_lease);
  EXPECT_GT(new_lease.token(), old_lease.token());
  EXPECT_TRUE(gate.admit(key, new_lease.token()));
  // The old holder wakes up and writes with its old token: rejected.
  EXPECT_FALSE(gate.admit(key, old_lease.token()));
  EXPECT_FALSE(gate.admit(old_lease.sequencer()));
  EXPECT_EQ(gate.highest(key), new_lease.token());
}

}  // namespace
}  // namespace warden::conformance

#include "warden/fence_gate.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace warden {
namespace {

TEST(FenceGate, AdmitsEqualOrHigherTokensAndRejectsStaleOnes) {
  FenceGate gate;
  EXPECT_TRUE(gate.admit("g/a", 5));
  EXPECT_TRUE(gate.admit("g/a", 5));  // the same holder writes twice
  EXPECT_TRUE(gate.admit("g/a", 9));
  EXPECT_FALSE(gate.admit("g/a", 7));  // a paused old holder wakes up
  EXPECT_EQ(gate.highest("g/a"), 9u);
}

TEST(FenceGate, LocksAreIndependent) {
  FenceGate gate;
  EXPECT_TRUE(gate.admit("g/a", 100));
  EXPECT_TRUE(gate.admit("g/b", 1));
  EXPECT_EQ(gate.highest("g/c"), 0u);
}

TEST(FenceGate, SequencerIsKeyedByGroupAndName) {
  FenceGate gate;
  EXPECT_TRUE(gate.admit(Sequencer{"g", "n", Mode::exclusive, 3}));
  EXPECT_FALSE(gate.admit("g/n", 2));
}

// Two holds of one cached grant share its token; the later hold's reuse is larger, and
// a write delayed from the earlier hold is rejected once the later one wrote.
TEST(FenceGate, HoldsOfOneCachedGrantAreOrderedByTheirReuse) {
  FenceGate gate;
  EXPECT_TRUE(gate.admit(Sequencer{"g", "n", Mode::exclusive, 7, 0}));
  EXPECT_TRUE(gate.admit(Sequencer{"g", "n", Mode::exclusive, 7, 1}));
  EXPECT_TRUE(gate.admit(Sequencer{"g", "n", Mode::exclusive, 7, 1}));
  EXPECT_FALSE(gate.admit(Sequencer{"g", "n", Mode::exclusive, 7, 0})) << "the earlier hold";
  EXPECT_FALSE(gate.admit("g/n", 7)) << "a token alone is the grant's first hold";
  EXPECT_TRUE(gate.admit(Sequencer{"g", "n", Mode::exclusive, 8, 0})) << "a later grant";
  EXPECT_FALSE(gate.admit(Sequencer{"g", "n", Mode::exclusive, 7, 5}));
  EXPECT_EQ(gate.highest("g/n"), 8u);
}

TEST(FenceGate, ConcurrentAdmitsKeepTheMaximum) {
  FenceGate gate;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&gate, t] {
      for (std::uint64_t i = 0; i < 1000; ++i) gate.admit("k", i * 8 + static_cast<unsigned>(t));
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(gate.highest("k"), 999u * 8 + 7);
}

}  // namespace
}  // namespace warden

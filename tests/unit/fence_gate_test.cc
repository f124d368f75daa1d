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

// conformance/multi_lock_suite.h — the multi-lock's contract (docs/primitives.md) as a
// parameterised suite of its own. Every engine has multi-locks (the core takes the
// members in order), so every engine's test executable instantiates it, on one case:
//
//   INSTANTIATE_TEST_SUITE_P(Mem, MultiLockConformance, ::testing::Values(kMemCase),
//                            name_printer);
//
// It is a suite apart from the lock suite only because its transfer clause runs for
// seconds, which the lock suite's many instances (TLS, clusters) need not repeat.
#pragma once

#include "conformance/conformance_suite.h"

namespace warden::conformance {

class MultiLockConformance : public Conformance {};

}  // namespace warden::conformance

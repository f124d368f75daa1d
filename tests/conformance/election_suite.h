// conformance/election_suite.h — leader election's contract (docs/primitives.md) as a
// parameterised suite of its own, instantiated only for the engines whose capabilities
// claim elections:
//
//   INSTANTIATE_TEST_SUITE_P(Mem, ElectionConformance, ::testing::Values(kMemCase),
//                            name_printer);
//
// It shares the lock suite's fixture; an engine that does not claim elections is checked
// by the lock suite instead, which expects Error(unsupported) from it.
#pragma once

#include "conformance/conformance_suite.h"

namespace warden::conformance {

class ElectionConformance : public Conformance {};

}  // namespace warden::conformance

// conformance/semaphore_suite.h — the semaphore's contract (docs/primitives.md) as a
// parameterised suite of its own, instantiated only for the engines whose capabilities
// claim semaphores:
//
//   INSTANTIATE_TEST_SUITE_P(Mem, SemaphoreConformance, ::testing::Values(kMemCase),
//                            name_printer);
//
// It shares the lock suite's fixture (the backend shared, a group per test); an
// engine that does not claim semaphores is checked by the lock suite instead, which
// expects Error(unsupported) from it.
#pragma once

#include "conformance/conformance_suite.h"

namespace warden::conformance {

class SemaphoreConformance : public Conformance {};

}  // namespace warden::conformance

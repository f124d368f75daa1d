// fuzz/fuzz_check.h — the fuzz targets' assertion: on failure, name the check and abort,
// so libFuzzer (and the replay driver) saves the input that broke it.
#pragma once

#include <cstdio>
#include <cstdlib>

#define WARDEN_FUZZ_CHECK(cond)                                                     \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (false)

// An engine module that says it comes from another version of warden, for
// engine_modules_test.cc: the command must not use it. Loaded, it appends a line to the
// file WARDEN_TEST_MODULE_LOADED names, so a test can tell whether the command loaded it.
#include <cstdio>
#include <cstdlib>

#include "cli/modules/engine_module.h"

namespace {

[[gnu::constructor]] void note_loaded() {
  const char* file = std::getenv("WARDEN_TEST_MODULE_LOADED");
  if (file == nullptr) return;
  if (std::FILE* out = std::fopen(file, "a")) {
    std::fputs("loaded\n", out);
    std::fclose(out);
  }
}

}  // namespace

extern "C" const warden::cli::EngineModule* warden_engine_module() {
  static constexpr const char* kNoSchemes[] = {nullptr};
  static const warden::cli::EngineModule module{"0.0.0-other", "etcd", kNoSchemes, nullptr};
  return &module;
}

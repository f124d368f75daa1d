// An engine module that says it comes from another version of warden, for
// engine_modules_test.cc: the command must not use it.
#include "cli/modules/engine_module.h"

extern "C" const warden::cli::EngineModule* warden_engine_module() {
  static constexpr const char* kNoSchemes[] = {nullptr};
  static const warden::cli::EngineModule module{"0.0.0-other", "etcd", kNoSchemes, nullptr};
  return &module;
}

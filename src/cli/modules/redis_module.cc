// The redis engine module of the `warden` command (engine_module.h): libwarden-redis,
// which registers redis://, rediss://, redis+sentinel://, redis+cluster:// and
// redlock://. The Redis baseline of `warden bench` is in the command itself: it needs
// only hiredis, which the core links anyway.
#include "cli/modules/engine_module.h"
#include "warden/version.h"

extern "C" const warden::cli::EngineModule* warden_engine_module() {
  static constexpr const char* kNoSchemes[] = {nullptr};
  static const warden::cli::EngineModule module{WARDEN_VERSION_STRING, "redis", kNoSchemes,
                                                nullptr};
  return &module;
}

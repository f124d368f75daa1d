// cli/modules/engine_module.h — what an engine module of the `warden` command offers.
//
// The command links only the core (libwarden: mem:// and warden://). Every other engine
// reaches it as a module, <libdir>/warden/engines/<component>.so, installed by that
// engine's package (libwarden-etcd0 installs etcd.so): the module links the engine's
// library, which registers the engine's URI schemes as it is loaded
// (compose/<component>_component.cc), and carries the engine's `warden bench` baseline,
// which speaks the backend through its own client library. So `apt install warden
// libwarden-redis0` gives a command that speaks redis:// without gRPC, libpq, libmariadb
// or the ZooKeeper client installed. cli/engine_modules.h loads them.
//
// A module is used only when it was built with this very version of warden: the C++
// types below cross the boundary as they are, so the loader reads `version` first (it
// stays the first member in every version) and goes no further on a mismatch.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bench/run.h"
#include "bench/workload.h"

namespace warden::cli {

// Opens one `warden bench` baseline client per workload client on the backend at `url`;
// `timeout` bounds each call where the baseline's client library takes a bound.
using BaselineOpener = std::vector<std::unique_ptr<bench::CycleClient>> (*)(
    const std::string& url, const bench::Workload& workload, std::chrono::milliseconds timeout);

struct EngineModule {
  const char* version;    // WARDEN_VERSION_STRING of the module's build: always first
  const char* component;  // "etcd": the module's file is <component>.so
  // The URI schemes of open_baseline, nullptr-terminated; none when open_baseline is null.
  const char* const* baseline_schemes;
  BaselineOpener open_baseline;
};

}  // namespace warden::cli

// Every module defines it; the loader finds it with dlsym.
extern "C" const warden::cli::EngineModule* warden_engine_module();

// The postgres engine module of the `warden` command (engine_module.h): libwarden-postgres, and
// the postgres baseline of `warden bench` (pg_advisory_lock through libpq).
#include "bench/postgres_baseline.h"
#include "cli/modules/engine_module.h"
#include "warden/version.h"

namespace {

std::vector<std::unique_ptr<warden::bench::CycleClient>> open_baseline(
    const std::string& url, const warden::bench::Workload& workload,
    std::chrono::milliseconds /*timeout*/) {
  namespace bench = warden::bench;
  return bench::open_postgres_clients(url, workload);
}

}  // namespace

extern "C" const warden::cli::EngineModule* warden_engine_module() {
  static constexpr const char* kSchemes[] = {"postgres", "postgresql", nullptr};
  static const warden::cli::EngineModule module{WARDEN_VERSION_STRING, "postgres", kSchemes,
                                                &open_baseline};
  return &module;
}

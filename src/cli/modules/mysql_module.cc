// The mysql engine module of the `warden` command (engine_module.h): libwarden-mysql, and
// the mysql baseline of `warden bench` (GET_LOCK through libmariadb).
#include "bench/mysql_baseline.h"
#include "cli/modules/engine_module.h"
#include "warden/version.h"

namespace {

std::vector<std::unique_ptr<warden::bench::CycleClient>> open_baseline(
    const std::string& url, const warden::bench::Workload& workload,
    std::chrono::milliseconds /*timeout*/) {
  namespace bench = warden::bench;
  return bench::open_mysql_clients(url, workload);
}

}  // namespace

extern "C" const warden::cli::EngineModule* warden_engine_module() {
  static constexpr const char* kSchemes[] = {"mysql", nullptr};
  static const warden::cli::EngineModule module{WARDEN_VERSION_STRING, "mysql", kSchemes,
                                                &open_baseline};
  return &module;
}

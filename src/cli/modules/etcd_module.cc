// The etcd engine module of the `warden` command (engine_module.h): libwarden-etcd, and
// the etcd baseline of `warden bench` (etcd's own lock service (v3lockpb.Lock) over gRPC).
#include "bench/etcd_baseline.h"
#include "cli/modules/engine_module.h"
#include "warden/version.h"

namespace {

std::vector<std::unique_ptr<warden::bench::CycleClient>> open_baseline(
    const std::string& url, const warden::bench::Workload& workload,
    std::chrono::milliseconds timeout) {
  namespace bench = warden::bench;
  return bench::open_etcd_clients(url, workload, timeout);
}

}  // namespace

extern "C" const warden::cli::EngineModule* warden_engine_module() {
  static constexpr const char* kSchemes[] = {"etcd", nullptr};
  static const warden::cli::EngineModule module{WARDEN_VERSION_STRING, "etcd", kSchemes,
                                                &open_baseline};
  return &module;
}

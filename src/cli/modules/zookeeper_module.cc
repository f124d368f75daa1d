// The zookeeper engine module of the `warden` command (engine_module.h): libwarden-zookeeper, and
// the zookeeper baseline of `warden bench` (the ZooKeeper recipe through the C client).
#include "bench/zk_baseline.h"
#include "cli/modules/engine_module.h"
#include "warden/version.h"

namespace {

std::vector<std::unique_ptr<warden::bench::CycleClient>> open_baseline(
    const std::string& url, const warden::bench::Workload& workload,
    std::chrono::milliseconds timeout) {
  namespace bench = warden::bench;
  return bench::open_zookeeper_clients(url, workload, timeout);
}

}  // namespace

extern "C" const warden::cli::EngineModule* warden_engine_module() {
  static constexpr const char* kSchemes[] = {"zk", nullptr};
  static const warden::cli::EngineModule module{WARDEN_VERSION_STRING, "zookeeper", kSchemes,
                                                &open_baseline};
  return &module;
}

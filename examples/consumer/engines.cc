// Which of warden's engines this program has: it links warden::<engine> (or
// warden-<engine> in pkg-config) for the engines given as arguments and nothing else, so
// exactly those must open and every other engine must say which component it lacks.
//
//   warden_engines redis            # linked with warden::core and warden::redis only
//
// Each URI points at a port nobody listens on: an engine that is there fails to
// connect (or answers with its own error); only an absent one fails with "unsupported"
// naming its package. Exits 0 when the engines present are exactly the arguments.
#include <warden/warden.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

namespace {

struct Probe {
  std::string_view component;
  std::string_view uri;
};

constexpr Probe kProbes[] = {
    {"redis", "redis://127.0.0.1:1"},
    {"etcd", "etcd://127.0.0.1:1"},
    {"zookeeper", "zk://127.0.0.1:1"},
    {"postgres", "postgres://warden@127.0.0.1:1/warden"},
    {"mysql", "mysql://warden@127.0.0.1:1/warden"},
};

// True when the program has the engine behind `probe`.
bool has_engine(const Probe& probe) {
  warden::ClientOptions options;
  options.op_timeout = std::chrono::seconds(2);
  try {
    warden::Client::open(probe.uri, options);
    return true;  // nothing listens there, but an engine that opens lazily may not know yet
  } catch (const warden::Error& e) {
    const std::string package = "libwarden-" + std::string(probe.component) + "0";
    const bool absent = e.code() == warden::Errc::unsupported &&
                        std::string_view(e.what()).find(package) != std::string_view::npos;
    std::cout << probe.uri << ": " << e.what() << '\n';  // what() leads with the code
    return !absent;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string_view> expected(argv + 1, argv + argc);
  bool ok = true;
  for (const Probe& probe : kProbes) {
    const bool want =
        std::find(expected.begin(), expected.end(), probe.component) != expected.end();
    const bool has = has_engine(probe);
    if (has != want) {
      std::cerr << "warden_engines: FAILED: the " << probe.component << " engine is "
                << (has ? "there, and this program did not link it"
                        : "missing, and this program linked it")
                << '\n';
      ok = false;
    }
  }
  if (ok) std::cout << "warden_engines: ok\n";
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}

#include "cli/engine_modules.h"

#include <dlfcn.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <system_error>

#include "compose/engine_registry.h"
#include "warden/error.h"
#include "warden/version.h"

namespace warden::cli {
namespace {

namespace fs = std::filesystem;

struct Loaded {
  std::mutex mutex;  // modules load on whichever thread first opens a Client of theirs
  std::map<std::string, BaselineOpener, std::less<>> baselines;  // by URI scheme, guarded
};

Loaded& loaded() {
  static Loaded instance;
  return instance;
}

fs::path module_directory() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  return (self.parent_path() / WARDEN_MODULES_FROM_BIN).lexically_normal();
}

// Loads <dir>/<component>.so, or notes with the registry why it is not there.
void load_module(const fs::path& dir, std::string_view component) {
  const std::string package = "libwarden-" + std::string(component) + "0";
  const fs::path file = dir / (std::string(component) + ".so");
  std::error_code ec;
  if (!fs::exists(file, ec)) {
    compose::note_absent_component(component, "the warden command found no module " +
                                                  file.string() + " (install " + package + ")");
    return;
  }
  // RTLD_LOCAL: a module's symbols stay its own; RTLD_NOW: a library missing beneath it
  // fails here, with the loader's message, not in the middle of a command. Never closed:
  // the engine it registered lives as long as the process.
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    compose::note_absent_component(component, "the warden command could not load " + file.string() +
                                                  ": " + (why != nullptr ? why : "unknown error") +
                                                  " (reinstall " + package + ")");
    return;
  }
  using Entry = const EngineModule* (*)();
  const auto entry = reinterpret_cast<Entry>(dlsym(handle, "warden_engine_module"));
  const EngineModule* module = entry != nullptr ? entry() : nullptr;
  if (module == nullptr || module->version == nullptr ||
      std::string_view(module->version) != WARDEN_VERSION_STRING) {
    // Its engine library is loaded, and registered itself; a module of another version
    // must not serve a URI, so the registration is withdrawn.
    compose::withdraw_component(component);
    compose::note_absent_component(
        component, file.string() + " is " +
                       (module == nullptr || module->version == nullptr
                            ? std::string("not a warden engine module")
                            : "from warden " + std::string(module->version)) +
                       ", this command is warden " WARDEN_VERSION_STRING " (install " + package +
                       " of the same version as warden)");
    return;
  }
  if (module->open_baseline == nullptr) return;
  const std::lock_guard lock(loaded().mutex);
  for (const char* const* scheme = module->baseline_schemes; *scheme != nullptr; ++scheme) {
    loaded().baselines.emplace(*scheme, module->open_baseline);
  }
}

// The registry's ComponentLoader: called at most once per component it does not have.
void load_engine_module(std::string_view component) { load_module(module_directory(), component); }

}  // namespace

void use_engine_modules() { compose::set_component_loader(&load_engine_module); }

BaselineOpener module_baseline(std::string_view scheme) {
  (void)compose::load_component(compose::component_of(scheme));
  {
    const std::lock_guard lock(loaded().mutex);
    const auto it = loaded().baselines.find(scheme);
    if (it != loaded().baselines.end()) return it->second;
  }
  throw Error(Errc::unsupported, compose::describe_absent(scheme));
}

}  // namespace warden::cli

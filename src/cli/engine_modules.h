// cli/engine_modules.h — the `warden` command's engines beyond the core: the modules
// (modules/engine_module.h) in its module directory, loaded at start.
#pragma once

#include <string>
#include <string_view>

#include "cli/modules/engine_module.h"

namespace warden::cli {

// Loads every engine module found in the module directory (WARDEN_MODULES_FROM_BIN,
// relative to the directory of this program: <libdir>/warden/engines when installed).
// A module that is missing, fails to load or comes from another version of warden is
// left out; a URI its engine would serve then fails with a message that says which
// package to install and why the module was not used. Call once, before any Client is
// opened; later calls do nothing.
void load_engine_modules();

// The `warden bench` baseline for `scheme` from a loaded module. Throws Error(unsupported)
// naming the component to install when no loaded module has one.
BaselineOpener module_baseline(std::string_view scheme);

}  // namespace warden::cli

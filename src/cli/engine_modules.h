// cli/engine_modules.h — the `warden` command's engines beyond the core: the modules
// (modules/engine_module.h) in its module directory, each loaded when a URI first needs
// its engine. Loading all five at start cost about 70 ms of every command's start (gRPC,
// the ZooKeeper, PostgreSQL and MariaDB clients) whichever engine it used.
#pragma once

#include <string>
#include <string_view>

#include "cli/modules/engine_module.h"

namespace warden::cli {

// Makes the engine registry load a component's module from the module directory
// (WARDEN_MODULES_FROM_BIN, relative to the directory of this program:
// <libdir>/warden/engines when installed) when a URI first needs it. A module that is
// missing, fails to load or comes from another version of warden is left out; the URI
// then fails with a message that says which package to install and why the module was
// not used. Call once, before any Client is opened.
void use_engine_modules();

// The `warden bench` baseline for `scheme` from its engine's module, loaded if it was not.
// Throws Error(unsupported) naming the component to install when no module has one.
BaselineOpener module_baseline(std::string_view scheme);

}  // namespace warden::cli

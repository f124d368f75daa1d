// engines/registry.h — maps a URI's scheme to the engine that serves it.
#pragma once

#include <memory>
#include <string_view>

#include "core/engine.h"
#include "core/uri.h"
#include "warden/options.h"

namespace warden::engines {

// Opens the engine for `uri`. Throws Error(invalid_argument) for an unknown scheme or
// a URI the engine rejects; engine-specific errors when it cannot connect.
std::unique_ptr<core::Engine> open_engine(const core::Uri& uri, const ClientOptions& options);

}  // namespace warden::engines

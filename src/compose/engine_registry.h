// compose/engine_registry.h — maps a URI's scheme to the engine that serves it.
//
// compose/ is the composition root: the one place that knows every engine and wires one
// into a Client (open_client.cc). It sits above core/ and engines/, so every include
// arrow points down: the core knows engines only as core::Engine.
#pragma once

#include <memory>
#include <string_view>

#include "core/engine.h"
#include "core/uri.h"
#include "warden/options.h"

namespace warden::compose {

// Opens the engine for `uri`. Throws Error(invalid_argument) for an unknown scheme or
// a URI the engine rejects; engine-specific errors when it cannot connect.
std::unique_ptr<core::Engine> open_engine(const core::Uri& uri, const ClientOptions& options);

}  // namespace warden::compose

// compose/engine_registry.h — maps a URI's scheme to the engine that serves it.
//
// compose/ is the composition root: the one place that knows every engine and wires one
// into a Client (open_client.cc). It sits above core/ and engines/, so every include
// arrow points down: the core knows engines only as core::Engine.
//
// Engines come in components (docs/architecture.md): the core (libwarden: mem:// and
// warden://) opens its own; every other component is a library of its own
// (libwarden-redis, libwarden-etcd, ...) that registers itself here when it is loaded
// (<component>_component.cc), by a program that links it or by the warden command's
// module loader. A URI whose component is not loaded fails with a message naming it.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "core/engine.h"
#include "core/uri.h"
#include "warden/options.h"

namespace warden::compose {

// Opens an engine of a component for `uri` (its scheme already resolved from a TLS
// alias, see core::resolve_tls_scheme).
using EngineOpener = std::unique_ptr<core::Engine> (*)(const core::Uri& uri,
                                                       const ClientOptions& options);

// The component that serves `scheme` ("core", "redis", "etcd", "zookeeper", "postgres",
// "mysql"), TLS aliases included; empty for a scheme no component serves.
std::string_view component_of(std::string_view scheme);

// The components beyond the core, each its own library: "redis", "etcd", ...
std::span<const std::string_view> engine_components();

// Called by a component's library as it is loaded. A second registration of a component
// keeps the first.
void register_component(std::string_view component, EngineOpener open);

// Forgets a registered component: the warden command's module loader, for a module of
// another version whose library registered itself as it was loaded.
void withdraw_component(std::string_view component);

// Whether `component` is loaded (always true for "core").
bool has_component(std::string_view component);

// How a program loads a component it does not link when a URI first needs it (the
// warden command's module loader, cli/engine_modules.h); a load that fails notes why
// (note_absent_component). Set once, before any Client is opened.
using ComponentLoader = void (*)(std::string_view component);
void set_component_loader(ComponentLoader load);

// Whether `component` is loaded, after asking the loader for it if it is not: the
// loader is asked at most once per component, and a caller that arrives while it loads
// waits for it.
bool load_component(std::string_view component);

// Why a component a program tried to load is absent (the warden command's module
// loader: no module, or one of another version). Said in the error of a URI the
// component would serve.
void note_absent_component(std::string_view component, std::string why);

// The message for a URI of `scheme` whose component this program does not have: which
// library and package bring it, and anything noted about it.
std::string describe_absent(std::string_view scheme);

// Opens the engine for `uri`. Throws Error(invalid_argument) for an unknown scheme or a
// URI the engine rejects, Error(unsupported) naming the component for a scheme whose
// component this program does not have, engine-specific errors when it cannot connect.
std::unique_ptr<core::Engine> open_engine(const core::Uri& uri, const ClientOptions& options);

}  // namespace warden::compose

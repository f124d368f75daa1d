// compose/postgres_component.cc — libwarden-postgres registers postgres:// and postgresql:// as it
// is loaded.
#include "compose/engine_registry.h"
#include "engines/postgres/pg_engine.h"

namespace warden::compose {
namespace {

const bool registered = (register_component("postgres", &engines::postgres::open), true);

}  // namespace
}  // namespace warden::compose

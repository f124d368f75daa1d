// compose/mysql_component.cc — libwarden-mysql registers mysql:// as it is loaded.
#include "compose/engine_registry.h"
#include "engines/mysql/mysql_engine.h"

namespace warden::compose {
namespace {

const bool registered = (register_component("mysql", &engines::mysql::open), true);

}  // namespace
}  // namespace warden::compose

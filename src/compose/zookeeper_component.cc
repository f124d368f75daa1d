// compose/zookeeper_component.cc — libwarden-zookeeper registers zk:// as it is loaded.
#include "compose/engine_registry.h"
#include "engines/zookeeper/zk_engine.h"

namespace warden::compose {
namespace {

const bool registered = (register_component("zookeeper", &engines::zookeeper::open), true);

}  // namespace
}  // namespace warden::compose

// compose/etcd_component.cc — libwarden-etcd registers etcd:// and etcds:// as it is loaded.
#include "compose/engine_registry.h"
#include "engines/etcd/etcd_engine.h"

namespace warden::compose {
namespace {

const bool registered = (register_component("etcd", &engines::etcd::open), true);

}  // namespace
}  // namespace warden::compose

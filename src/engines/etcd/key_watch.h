// engines/etcd/key_watch.h — Election::observe's watch on etcd://: an etcd watch over
// the lock's key range (every request key: a grant is a key reaching the front, a
// release or expiry a delete, a proclaim a put), resumed from the revision after the
// last change it reported, so nothing between two waits is missed.
#pragma once

#include <memory>

#include "core/engine.h"
#include "engines/etcd/etcd_rpc.h"
#include "engines/etcd/lock_keys.h"

namespace warden::engines::etcd {

// Reads the store's revision now (one range) and watches the lock's keys from the next
// one. Throws what EtcdRpc::range throws.
std::unique_ptr<core::KeyWatch> open_key_watch(std::shared_ptr<EtcdRpc> rpc, const LockKeys& keys);

}  // namespace warden::engines::etcd

// engines/warden/key_watch.h — Election::observe's watch on warden://: a connection of
// its own that sent `WATCH key` and then only reads the server's CHANGED pushes
// (docs/protocol.md, WATCH). The server pushes one CHANGED per batch of changes; the
// watch drains whatever else is already buffered, so a burst is one signal.
#pragma once

#include <memory>

#include "core/engine.h"
#include "engines/resp_client/connector.h"

namespace warden::engines::wardend {

// Opens a connection, sends WATCH for `key` and waits for its +OK by `deadline`. Throws
// what connecting throws, and the mapped Error for a refusal (NOPERM: no inspect right
// on the key's group).
std::unique_ptr<core::KeyWatch> open_key_watch(resp_client::Connector& connector,
                                               const core::LockKey& key,
                                               Clock::time_point deadline);

}  // namespace warden::engines::wardend

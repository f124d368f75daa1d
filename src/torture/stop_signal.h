// torture/stop_signal.h — how a torture process (a client, the resource) is told to end
// its loop: SIGINT and SIGTERM set a flag the loop reads, and nothing else.
#pragma once

#include <csignal>

namespace warden::torture {

inline volatile std::sig_atomic_t stop_signalled = 0;
inline void on_stop_signal(int) { stop_signalled = 1; }

}  // namespace warden::torture

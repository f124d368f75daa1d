// engines/resp_client/wait.h — the one poll(2) wait every blocking step of a RESP
// connection goes through (connect's TLS handshake, writes, reads), so each is bounded
// by its deadline and wakes on a caller's wake fd.
#pragma once

#include "warden/types.h"

namespace warden::engines::resp_client {

enum class Ready { fd, wake, timeout };

// Waits until `fd` has `events` (or an error), `wake_fd` (if >= 0) is readable, or
// `until` passes (Clock::time_point::max(): no limit; a time in the past: a check
// without waiting). poll() counts whole milliseconds, so the wait is rounded up and
// repeated until `until` has really passed. A failing poll() returns Ready::fd: the
// read or write that follows reports the error.
Ready wait_for(int fd, short events, Clock::time_point until, int wake_fd = -1);

}  // namespace warden::engines::resp_client

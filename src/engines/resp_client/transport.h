// engines/resp_client/transport.h — how a Connection moves bytes over its socket: plain
// TCP (send/recv) or TLS (tls_transport.h). The Connection keeps the RESP encoding and
// hiredis' reply reader; a Transport only reads and writes, never blocks, and never
// waits: it says what it would wait for, and the Connection polls with its deadline.
//
// Thread safety: none, like the Connection that owns it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "warden/error.h"

namespace warden::engines::resp_client {

struct IoResult {
  enum Status {
    ok,          // `bytes` were read or written (> 0)
    want_read,   // nothing now: try again once the socket is readable
    want_write,  // nothing now: try again once the socket is writable
    closed,      // the peer closed the connection (reads only)
    failed,      // the transport failed: `code` and `detail` say how
  };
  IoResult() = default;
  IoResult(Status s, std::size_t n = 0) : status(s), bytes(n) {}  // NOLINT: implicit

  Status status = ok;
  std::size_t bytes = 0;
  // For `failed`: unavailable for a broken connection (detail: what the system said);
  // permission_denied when a TLS peer refused our certificate (detail: a whole
  // sentence that names the server).
  Errc code = Errc::unavailable;
  std::string detail;
};

class Transport {
 public:
  virtual ~Transport() = default;

  // Reads up to `len` (> 0) bytes into `buf` without blocking.
  virtual IoResult read(char* buf, std::size_t len) = 0;
  // Writes up to `len` (> 0) bytes without blocking; never raises SIGPIPE. After
  // want_read/want_write, the next call must pass the same data again.
  virtual IoResult write(const char* data, std::size_t len) = 0;
  // true if bytes were received and are held inside the transport (TLS records already
  // read off the socket): read() returns them although poll(2) on the socket may not
  // say it is readable.
  virtual bool has_buffered() const = 0;
  // Ends our direction of the conversation (TLS: close_notify first); replies can still
  // be read.
  virtual void shutdown_write() = 0;
  // true for TLS.
  virtual bool secure() const = 0;
};

// send()/recv() on the non-blocking socket `fd`, which the caller keeps owning.
std::unique_ptr<Transport> plain_transport(int fd);

}  // namespace warden::engines::resp_client

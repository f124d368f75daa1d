// engines/resp_client/errors.h — everything that can go wrong on a RESP connection,
// translated into warden::Error in this one place for every RESP engine (wardend,
// Redis).
//
//   what went wrong                                   Errc
//   ------------------------------------------------  -------------------
//   connect refused, unreachable, timed out           unavailable
//   connection lost (EOF, reset) or I/O error         unavailable
//   no reply within the timeout                       deadline_exceeded
//   bytes that are not RESP                           internal
//   error reply, by its code word:
//     NOAUTH, WRONGPASS, NOPERM                       permission_denied
//     INVALID (wardend: bad key, mode, ttl, ...)      invalid_argument
//     LIMIT (wardend), OOM (Redis)                    resource_exhausted
//     STARTING (wardend), LOADING, BUSY, TRYAGAIN,
//       MASTERDOWN, CLUSTERDOWN, READONLY             unavailable
//     ERR and anything else                           internal
//
// ERR means the server did not understand what we sent (unknown command, wrong
// arity): a bug on our side, never worth retrying. Engines that treat a code as a
// normal result (wardend's STARTING during its restart embargo) check
// Reply::error_code() before they get here.
#pragma once

#include <string>
#include <string_view>

#include "engines/resp_client/reply.h"
#include "warden/error.h"

namespace warden::engines::resp_client {

// How a transport operation failed.
enum class Failure {
  connect,   // could not connect (refused, unreachable, name not resolved, timed out)
  io,        // read or write failed, or the peer closed the connection
  timeout,   // no reply (or no room to write) before the deadline
  protocol,  // the peer sent something that is not RESP
};

// The Error for a transport failure. `endpoint` is "host:port"; `detail` says what
// the system or hiredis reported.
Error transport_error(Failure failure, std::string_view endpoint, std::string_view detail);

// The Error for an error reply. `context` names the command and endpoint, e.g.
// "RENEW on 127.0.0.1:7380". Precondition: reply.is_error().
Error reply_error(const Reply& reply, std::string_view context);

// The Error for an AUTH the server refused: always permission_denied (the server may
// answer ERR when it has no password set, which is a configuration mismatch too).
Error auth_error(const Reply& reply, std::string_view endpoint);

// The Error for a well-formed reply of the wrong shape (e.g. a string where an integer
// was due): internal, naming the reply.
Error unexpected_reply(const Reply& reply, std::string_view context);

}  // namespace warden::engines::resp_client

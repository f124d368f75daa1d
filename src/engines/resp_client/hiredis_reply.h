// engines/resp_client/hiredis_reply.h — hiredis' reply objects as Replies. The one place
// that reads a redisReply, apart from the connection that owns it, so the conversion
// can be driven by hiredis' reader on bytes alone (fuzz/resp_reply_fuzz.cc).
#pragma once

#include "engines/resp_client/reply.h"

struct redisReply;

namespace warden::engines::resp_client {

// A deep copy of `reply`; hiredis keeps ownership of it. A nil, and any type this
// client does not know, becomes nil_reply().
Reply from_hiredis(const redisReply& reply);

}  // namespace warden::engines::resp_client

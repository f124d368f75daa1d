#include "engines/resp_client/hiredis_reply.h"

#include <hiredis/hiredis.h>

#include <string>
#include <utility>
#include <vector>

namespace warden::engines::resp_client {

// hiredis nests arrays at most 7 deep (its reader's task stack), so the recursion is
// bounded.
Reply from_hiredis(const redisReply& r) {
  switch (r.type) {
    case REDIS_REPLY_STATUS:
      return status_reply(std::string(r.str, r.len));
    case REDIS_REPLY_ERROR:
      return error_reply(std::string(r.str, r.len));
    case REDIS_REPLY_INTEGER:
      return integer_reply(r.integer);
    case REDIS_REPLY_STRING:
      return bulk_reply(std::string(r.str, r.len));
    case REDIS_REPLY_ARRAY: {
      std::vector<Reply> elements;
      elements.reserve(r.elements);
      for (std::size_t i = 0; i < r.elements; ++i) elements.push_back(from_hiredis(*r.element[i]));
      return array_reply(std::move(elements));
    }
    default:
      return nil_reply();
  }
}

}  // namespace warden::engines::resp_client

// fuzz/resp_reply_fuzz.cc — fuzz target for what warden's RESP clients make of a
// server's replies: a server (wardend, Redis, a Redlock master) that answers garbage.
//
// The input is what the server sent. It goes through hiredis' reader, as on a
// connection (resp_client::Connection), and every reply it yields is converted with
// resp_client::from_hiredis and given to every function that turns a reply into an
// engine's result. What must hold for any bytes:
//   - the Reply is a faithful deep copy of hiredis' object;
//   - describe() stays within its bound; error_code() is the error's first word;
//   - warden://  parse_acquire, parse_flag, check_hello (engines/warden/protocol.h) and
//     redis://   integer_of, attempt_of (engines/redis/script_replies.h) return a result
//     within their contract or throw Error: the mapped code of an error reply, else
//     internal, with a message naming the call; an attempt's retry_ms can be added to
//     the clock as the engine does (no overflow);
//   - redlock:// yes_or_no, token_read_of and granted_token_of
//     (engines/redlock/script_replies.h) never throw, a granted token is above 0, and next_token
//     over every read the input gave is larger than each of them (it never wraps to 0).
//
// A failed check prints what failed and aborts, which libFuzzer reports as a crash.
// See CMakeLists.txt here for running it.
#include <hiredis/hiredis.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engines/redis/script_replies.h"
#include "engines/redlock/quorum.h"
#include "engines/redlock/script_replies.h"
#include "engines/resp_client/errors.h"
#include "engines/resp_client/hiredis_reply.h"
#include "engines/resp_client/reply.h"
#include "engines/warden/protocol.h"
#include "fuzz_check.h"
#include "warden/error.h"

namespace warden::engines {
namespace {

using resp_client::Reply;

constexpr std::string_view kContext = "CALL on 127.0.0.1:1";

bool same(const Reply& r, const redisReply& h) {
  switch (h.type) {
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
    case REDIS_REPLY_STRING: {
      const Reply::Type type = h.type == REDIS_REPLY_STATUS  ? Reply::Type::status
                               : h.type == REDIS_REPLY_ERROR ? Reply::Type::error
                                                             : Reply::Type::bulk;
      return r.type == type && r.text == std::string_view(h.str, h.len);
    }
    case REDIS_REPLY_INTEGER:
      return r.type == Reply::Type::integer && r.integer == h.integer;
    case REDIS_REPLY_ARRAY:
      if (r.type != Reply::Type::array || r.elements.size() != h.elements) return false;
      for (std::size_t i = 0; i < h.elements; ++i) {
        if (!same(r.elements[i], *h.element[i])) return false;
      }
      return true;
    default:
      return r.type == Reply::Type::nil;
  }
}

// An Error thrown for `reply`: the mapped code of an error reply, else internal; the
// message names the call.
void check_error(const Error& e, const Reply& reply) {
  if (reply.is_error()) {
    WARDEN_FUZZ_CHECK(e.code() == resp_client::reply_error(reply, kContext).code());
  } else {
    WARDEN_FUZZ_CHECK(e.code() == Errc::internal);
  }
  WARDEN_FUZZ_CHECK(std::string_view(e.what()).find(kContext) != std::string_view::npos);
}

// Runs `interpret`; an Error it throws must be check_error's.
void interpreting(const Reply& reply, const std::function<void()>& interpret) {
  try {
    interpret();
  } catch (const Error& e) {
    check_error(e, reply);
  }
}

void check_reply(const Reply& r) {
  for (const std::size_t bound : {std::size_t{16}, std::size_t{200}}) {
    WARDEN_FUZZ_CHECK(r.describe(bound).size() <= bound + 3);
  }
  const std::string_view code = r.error_code();
  WARDEN_FUZZ_CHECK(r.is_error() ? r.text.starts_with(code) && code.find(' ') == code.npos
                                 : code.empty());
}

void check_warden(const Reply& r) {
  interpreting(r, [&] {
    const auto grant = wardend::parse_acquire(r, kContext);
    WARDEN_FUZZ_CHECK(grant.has_value() != r.is_nil());
    if (grant) WARDEN_FUZZ_CHECK(grant->token > 0 && grant->waited.count() >= 0);
  });
  interpreting(r, [&] {
    wardend::parse_flag(r, kContext);
    WARDEN_FUZZ_CHECK(r.is_integer() && (r.integer == 0 || r.integer == 1));
  });
  try {
    wardend::check_hello(r, "127.0.0.1:1");
    WARDEN_FUZZ_CHECK(r.is_array());
  } catch (const Error& e) {
    // unsupported: a server older than protocol 2 (no owner secrets) is refused.
    WARDEN_FUZZ_CHECK(e.code() == Errc::permission_denied || e.code() == Errc::invalid_argument ||
                      e.code() == Errc::unsupported);
  }
  WARDEN_FUZZ_CHECK(wardend::is_starting(r) == (r.error_code() == "STARTING"));
}

void check_redis(const Reply& r) {
  interpreting(r, [&] {
    redis::integer_of(r, kContext);
    WARDEN_FUZZ_CHECK(r.is_integer());
  });
  interpreting(r, [&] {
    const redis::Attempt attempt = redis::attempt_of(r, kContext);
    if (attempt.granted) {
      WARDEN_FUZZ_CHECK(attempt.token > 0);
    } else if (attempt.retry_ms >= 0) {
      WARDEN_FUZZ_CHECK(attempt.retry_ms >= 1 && attempt.retry_ms <= redis::kMaxRetry.count());
      // What the engine's wait does with it (UBSan reports an overflow).
      const auto until = Clock::now() + std::chrono::milliseconds(attempt.retry_ms + 1);
      WARDEN_FUZZ_CHECK(until > Clock::now());
    } else {
      WARDEN_FUZZ_CHECK(attempt.retry_ms == -1);
    }
  });
}

void check_redlock(const Reply& r, std::vector<redlock::TokenRead>& reads) {
  const auto vote = redlock::yes_or_no(r);
  WARDEN_FUZZ_CHECK(vote.has_value() == (r.is_integer() && (r.integer == 0 || r.integer == 1)));
  if (const auto read = redlock::token_read_of(r); read && *read) reads.push_back(**read);
  if (const auto granted = redlock::granted_token_of(r); granted && *granted) {
    WARDEN_FUZZ_CHECK(**granted > 0);
  }
}

// hiredis 0.14 allocates an array's element pointers as soon as it reads "*N", so a
// header declaring a billion elements costs gigabytes before any element arrives. On a
// connection calloc fails for absurd N and hiredis reports "Out of memory" (a protocol
// Error); moderate N is only wasted address space. Here an array longer than the input
// (which can never be completed by it, each element taking 3 bytes or more) fails the
// same way, so the fuzzer is not stopped by its malloc limit.
std::size_t g_max_elements = 0;
void* (*g_create_array)(const redisReadTask*, int) = nullptr;

void* create_array_capped(const redisReadTask* task, int elements) {
  if (elements < 0 || static_cast<std::size_t>(elements) > g_max_elements) return nullptr;
  return g_create_array(task, elements);
}

void cap_arrays(redisReader& reader, std::size_t max_elements) {
  static redisReplyObjectFunctions functions = *reader.fn;
  if (g_create_array == nullptr) g_create_array = functions.createArray;
  functions.createArray = create_array_capped;
  reader.fn = &functions;
  g_max_elements = max_elements;
}

struct FreeReader {
  void operator()(redisReader* reader) const { redisReaderFree(reader); }
};
struct FreeReply {
  void operator()(void* reply) const { freeReplyObject(reply); }
};

}  // namespace
}  // namespace warden::engines

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace warden::engines;
  const std::unique_ptr<redisReader, FreeReader> reader(redisReaderCreate());
  WARDEN_FUZZ_CHECK(reader != nullptr);
  cap_arrays(*reader, size);
  // An empty buffer is "nothing yet" to hiredis; feed only what there is.
  if (size > 0 &&
      redisReaderFeed(reader.get(), reinterpret_cast<const char*>(data), size) != REDIS_OK) {
    return 0;
  }
  std::vector<redlock::TokenRead> reads;
  while (true) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader.get(), &raw) != REDIS_OK || raw == nullptr) break;
    const std::unique_ptr<void, FreeReply> owned(raw);
    const redisReply& h = *static_cast<const redisReply*>(raw);
    const resp_client::Reply r = resp_client::from_hiredis(h);
    WARDEN_FUZZ_CHECK(same(r, h));
    check_reply(r);
    check_warden(r);
    check_redis(r);
    check_redlock(r, reads);
  }
  if (!reads.empty()) {
    const std::uint64_t token = redlock::next_token(reads);
    for (const auto& read : reads) WARDEN_FUZZ_CHECK(token > read.last && token > read.clock_us);
  }
  return 0;
}

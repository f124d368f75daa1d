// support/text_client.h — a wardend (or any RESP server) client for tests that speak
// the protocol itself: one hiredis connection whose replies come back as text, and the
// grant replies' token and owner secret.
#pragma once

#include <hiredis.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace warden::testing {

class TextClient {
 public:
  // Connects to 127.0.0.1:port; each reply is waited for up to `timeout_s` seconds.
  explicit TextClient(std::uint16_t port, long timeout_s = 10)
      : ctx_(redisConnectWithTimeout("127.0.0.1", port, timeval{timeout_s, 0}), &redisFree) {
    if (!ctx_ || ctx_->err != 0) throw std::runtime_error("cannot connect to wardend");
    redisSetTimeout(ctx_.get(), timeval{timeout_s, 0});
  }

  // Sends one request and returns its reply as text: "+OK", "-ERR ...", ":1", "$text",
  // "(nil)", "[a, b]".
  std::string operator()(const std::vector<std::string>& args) {
    send(args);
    return receive();
  }

  // The next reply (of a request sent before); "<no reply>" when none came within the
  // timeout or the connection broke.
  std::string receive() {
    void* raw = nullptr;
    if (redisGetReply(ctx_.get(), &raw) != REDIS_OK || raw == nullptr) return "<no reply>";
    std::string out = describe(static_cast<redisReply*>(raw));
    freeReplyObject(raw);
    return out;
  }

  // Sends without waiting for the reply (a parked ACQUIRE).
  void send(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    redisAppendCommandArgv(ctx_.get(), static_cast<int>(args.size()), argv.data(), lens.data());
    int done = 0;
    while (done == 0) {
      if (redisBufferWrite(ctx_.get(), &done) != REDIS_OK) return;
    }
  }

  // true once the server closed the connection (a reply, if any, is read past).
  bool closed_by_server() {
    void* raw = nullptr;
    while (redisGetReply(ctx_.get(), &raw) == REDIS_OK) freeReplyObject(raw);
    return ctx_->err == REDIS_ERR_EOF || ctx_->err == REDIS_ERR_IO;
  }

 private:
  static std::string describe(const redisReply* r) {
    switch (r->type) {
      case REDIS_REPLY_INTEGER:
        return ":" + std::to_string(r->integer);
      case REDIS_REPLY_NIL:
        return "(nil)";
      case REDIS_REPLY_ERROR:
        return "-" + std::string(r->str, r->len);
      case REDIS_REPLY_STATUS:
        return "+" + std::string(r->str, r->len);
      case REDIS_REPLY_STRING:
        return "$" + std::string(r->str, r->len);
      case REDIS_REPLY_ARRAY: {
        std::string out = "[";
        for (std::size_t i = 0; i < r->elements; ++i) {
          out += (i ? ", " : "") + describe(r->element[i]);
        }
        return out + "]";
      }
    }
    return "?";
  }
  std::unique_ptr<redisContext, decltype(&redisFree)> ctx_;
};

struct Grant {
  std::uint64_t token = 0;
  std::string secret;
};

// A grant reply "[:token, :waited_us, $secret]" parsed; token 0 for anything else.
inline Grant grant_of(const std::string& reply) {
  if (!reply.starts_with("[:")) return {};
  const auto secret = reply.find(", $");
  if (secret == std::string::npos) return {};
  return Grant{std::stoull(reply.substr(2)), reply.substr(secret + 3, 32)};
}

inline std::string renew(TextClient& c, const std::string& key, const Grant& g,
                         const std::string& ttl) {
  return c({"RENEW", key, std::to_string(g.token), g.secret, ttl});
}
inline std::string release(TextClient& c, const std::string& key, const Grant& g) {
  return c({"RELEASE", key, std::to_string(g.token), g.secret});
}

}  // namespace warden::testing

#include "support/redis_server.h"

#include <hiredis/hiredis.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace warden::testing {
namespace {

using namespace std::chrono_literals;

redisContext* as_context(void* p) { return static_cast<redisContext*>(p); }

struct FreeReply {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, FreeReply>;

// One command on `c`; nullptr on an I/O error (the context then says why).
ReplyPtr run(redisContext* c, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  return ReplyPtr(static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
}

void append_text(const redisReply* r, std::string& out);

}  // namespace

std::string reply_text(const redisReply* reply) {
  std::string out;
  append_text(reply, out);
  return out;
}

namespace {

void append_text(const redisReply* r, std::string& out) {
  switch (r->type) {
    case REDIS_REPLY_INTEGER:
      out += std::to_string(r->integer);
      break;
    case REDIS_REPLY_NIL:
      out += "(nil)";
      break;
    case REDIS_REPLY_ERROR:
      out += "(error) ";
      out.append(r->str, r->len);
      break;
    case REDIS_REPLY_ARRAY:
      for (std::size_t i = 0; i < r->elements; ++i) {
        if (i > 0) out += '\n';
        append_text(r->element[i], out);
      }
      break;
    default:  // status, string
      out.append(r->str, r->len);
  }
}

// AUTH as the server's options say: the ACL user when there is one, else the password.
std::vector<std::string> auth_command(const RedisOptions& o) {
  if (o.acl_user) return {"AUTH", *o.acl_user, o.acl_password.value_or("")};
  if (o.password) return {"AUTH", *o.password};
  return {};
}

timeval to_timeval(std::chrono::milliseconds d) {
  return timeval{static_cast<time_t>(d.count() / 1000),
                 static_cast<suseconds_t>(d.count() % 1000 * 1000)};
}

// A connected, authenticated context, or nullptr with `why` filled in. The connect
// waits at most min(2 s, timeout), each reply at most `timeout`.
redisContext* connect(std::uint16_t port, const RedisOptions& o, std::string& why,
                      std::chrono::milliseconds timeout = 5s) {
  redisContext* c = redisConnectWithTimeout(
      "127.0.0.1", port, to_timeval(std::min<std::chrono::milliseconds>(timeout, 2s)));
  if (c == nullptr || c->err != 0) {
    why = c ? c->errstr : "out of memory";
    if (c) redisFree(c);
    return nullptr;
  }
  redisSetTimeout(c, to_timeval(timeout));
  if (const auto auth = auth_command(o); !auth.empty()) {
    const ReplyPtr r = run(c, auth);
    if (!r || r->type == REDIS_REPLY_ERROR) {
      why = r ? std::string(r->str, r->len) : std::string(c->errstr);
      redisFree(c);
      return nullptr;
    }
  }
  return c;
}

// true once PING answers PONG: the server is up and done LOADING its data.
bool answers_ping(std::uint16_t port, const RedisOptions& o, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::string why;
    if (redisContext* c = connect(port, o, why)) {
      const ReplyPtr r = run(c, {"PING"});
      const bool pong = r && r->type == REDIS_REPLY_STATUS && std::string(r->str, r->len) == "PONG";
      redisFree(c);
      if (pong) return true;
    }
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

}  // namespace

std::string redis_server_path() {
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    for (std::string dir; std::getline(dirs, dir, ':');) {
      const std::string candidate = (dir.empty() ? "." : dir) + "/redis-server";
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  return "/usr/bin/redis-server";
}

RedisServer::RedisServer(RedisOptions options) : options_(std::move(options)), dir_("redis") {
  start();
}

RedisServer::~RedisServer() { process_.kill9(); }

std::string RedisServer::bare_uri() const { return "redis://127.0.0.1:" + std::to_string(port_); }

namespace {

std::string credentials(const RedisOptions& o) {
  if (o.acl_user) return *o.acl_user + ":" + o.acl_password.value_or("") + "@";
  if (o.password) return ":" + *o.password + "@";
  return "";
}

}  // namespace

std::string RedisServer::uri() const {
  return "redis://" + credentials(options_) + "127.0.0.1:" + std::to_string(port_);
}

std::string RedisServer::tls_uri(std::string_view host, std::string_view query) const {
  if (!options_.tls) throw std::logic_error("RedisServer::tls_uri: the server has no TLS port");
  std::string uri = "rediss://" + credentials(options_) + std::string(host) + ":" +
                    std::to_string(tls_port_) + "?ca=" + options_.tls->ca.string();
  if (!query.empty()) uri += "&" + std::string(query);
  return uri;
}

void RedisServer::start() {
  // A restart keeps the port, so clients reconnect to the address they know. Only the
  // first start may move to another port when it loses the race for a free one.
  const bool first = port_ == 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (first) {
      port_ = free_port();
      if (options_.tls) {
        do {
          tls_port_ = free_port();
        } while (tls_port_ == port_);
      }
    }
    std::vector<std::string> argv = {redis_server_path(),
                                     "--port",
                                     std::to_string(port_),
                                     "--bind",
                                     "127.0.0.1",
                                     "--dir",
                                     dir_.path().string(),
                                     "--save",
                                     "",
                                     "--protected-mode",
                                     "no",
                                     "--daemonize",
                                     "no",
                                     "--logfile",
                                     ""};
    if (options_.persistence) {
      argv.insert(argv.end(), {"--appendonly", "yes", "--appendfsync", "always"});
    } else {
      argv.insert(argv.end(), {"--appendonly", "no"});
    }
    if (options_.password) argv.insert(argv.end(), {"--requirepass", *options_.password});
    if (options_.acl_user) {
      argv.insert(argv.end(), {"--user", *options_.acl_user, "on",
                               ">" + options_.acl_password.value_or(""), "~*", "&*", "+@all"});
    }
    if (options_.tls) {
      argv.insert(argv.end(),
                  {"--tls-port", std::to_string(tls_port_), "--tls-cert-file",
                   options_.tls->cert.string(), "--tls-key-file", options_.tls->key.string(),
                   "--tls-ca-cert-file", options_.tls->ca.string(), "--tls-auth-clients",
                   options_.tls->auth_clients ? "yes" : "no"});
    }
    argv.insert(argv.end(), options_.extra_args.begin(), options_.extra_args.end());
    process_ = ServerProcess(argv, dir_.path() / "redis.log");
    process_.start();
    if (process_.wait_for_log("Ready to accept connections", 10s) &&
        answers_ping(port_, options_, 10s) && (tls_port_ == 0 || wait_for_port(tls_port_, 10s))) {
      return;
    }
    process_.kill9();
    if (!first) std::this_thread::sleep_for(100ms);
  }
  throw std::runtime_error("redis-server did not start; log:\n" + process_.log_text());
}

void RedisServer::kill9() { process_.kill9(); }
void RedisServer::pause() { process_.signal(SIGSTOP); }
void RedisServer::resume() { process_.signal(SIGCONT); }
bool RedisServer::running() { return process_.running(); }

RedisProbe::RedisProbe(const RedisServer& server, std::chrono::milliseconds timeout)
    : port_(server.port()), options_(server.options()), timeout_(timeout) {
  std::string why;
  context_ = connect(port_, options_, why, timeout_);
  if (context_ == nullptr) throw std::runtime_error("redis probe: cannot connect: " + why);
}

RedisProbe::~RedisProbe() {
  if (context_) redisFree(as_context(context_));
}

void* RedisProbe::reply(const std::vector<std::string>& args) {
  // One reconnect: the server may have been restarted since the last call.
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (context_ == nullptr) {
      std::string why;
      context_ = connect(port_, options_, why, timeout_);
      if (context_ == nullptr) throw std::runtime_error("redis probe: cannot connect: " + why);
    }
    if (ReplyPtr r = run(as_context(context_), args)) return r.release();
    redisFree(as_context(context_));
    context_ = nullptr;
  }
  throw std::runtime_error("redis probe: no reply to " + args.at(0));
}

std::string redis_command(std::uint16_t port, const std::vector<std::string>& args,
                          std::chrono::milliseconds timeout) {
  std::string why;
  redisContext* c = connect(port, RedisOptions{}, why, timeout);
  if (c == nullptr) {
    throw std::runtime_error("cannot connect to 127.0.0.1:" + std::to_string(port) + ": " + why);
  }
  const ReplyPtr r = run(c, args);
  const std::string error = r ? std::string() : std::string(c->errstr);
  redisFree(c);
  if (!r) {
    throw std::runtime_error("no reply to " + args.at(0) +
                             " from 127.0.0.1:" + std::to_string(port) + ": " + error);
  }
  return reply_text(r.get());
}

std::string RedisProbe::command(const std::vector<std::string>& args) {
  const ReplyPtr r(static_cast<redisReply*>(reply(args)));
  std::string text;
  append_text(r.get(), text);
  return text;
}

long long RedisProbe::integer(const std::vector<std::string>& args) {
  const ReplyPtr r(static_cast<redisReply*>(reply(args)));
  if (r->type != REDIS_REPLY_INTEGER) {
    std::string text;
    append_text(r.get(), text);
    throw std::runtime_error("redis probe: " + args.at(0) + " answered " + text);
  }
  return r->integer;
}

std::vector<std::string> RedisProbe::keys(int db) {
  std::vector<std::string> names;
  if (command({"SELECT", std::to_string(db)}) != "OK") {
    throw std::runtime_error("redis probe: cannot SELECT " + std::to_string(db));
  }
  std::string cursor = "0";
  do {
    const ReplyPtr r(static_cast<redisReply*>(reply({"SCAN", cursor, "COUNT", "1000"})));
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
      throw std::runtime_error("redis probe: unexpected SCAN reply");
    }
    cursor.assign(r->element[0]->str, r->element[0]->len);
    const redisReply* batch = r->element[1];
    for (std::size_t i = 0; i < batch->elements; ++i) {
      names.emplace_back(batch->element[i]->str, batch->element[i]->len);
    }
  } while (cursor != "0");
  command({"SELECT", "0"});
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());  // SCAN may repeat
  return names;
}

std::vector<std::string> RedisProbe::warden_keys(int db) {
  std::vector<std::string> names = keys(db);
  std::erase_if(names,
                [](const std::string& k) { return k.find("{warden:") == std::string::npos; });
  return names;
}

long long RedisProbe::kill_pubsub_clients() {
  return integer({"CLIENT", "KILL", "TYPE", "pubsub"});
}

long long RedisProbe::kill_normal_clients() {
  return integer({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
}

}  // namespace warden::testing

#include "engines/zookeeper/zk_session.h"

#include <cstdio>
#include <functional>
#include <memory>
#include <utility>

#include "warden/error.h"

namespace warden::engines::zookeeper {
namespace {

// Heap state of one asynchronous call: the C client hands `data` back to the completion,
// which calls `done` and deletes it. On zookeeper_close every pending completion is
// called (with ZCLOSING), so none leaks and every `done` is called once.
template <class T>
struct Call {
  std::function<void(T)> done;
};

template <class T>
void finish(const void* data, T result) {
  auto* call = static_cast<Call<T>*>(const_cast<void*>(data));
  call->done(std::move(result));
  delete call;
}

// A call the client could not even issue: answered at once with the code it failed with.
template <class T>
void fail(Call<T>* call, int rc) {
  T result{};
  result.rc = rc;
  call->done(std::move(result));
  delete call;
}

// The future the blocking calls wait on, and the `done` that fulfils it.
template <class T>
std::pair<std::function<void(T)>, std::future<T>> promised() {
  auto promise = std::make_shared<std::promise<T>>();
  auto future = promise->get_future();
  return {[promise](T value) { promise->set_value(std::move(value)); }, std::move(future)};
}

// A call answered by its result code alone (sync, set, delete): `issue` starts it with a
// completion that calls answer(); a call the client could not even issue is answered at
// once with the code it failed with.
template <class Issue>
std::future<int> result_code_call(Issue issue) {
  auto* call = new std::promise<int>;
  auto future = call->get_future();
  const int rc = issue(static_cast<const void*>(call));
  if (rc != ZOK) {
    call->set_value(rc);
    delete call;
  }
  return future;
}

void answer(int rc, const void* call) {
  auto* promise = static_cast<std::promise<int>*>(const_cast<void*>(call));
  promise->set_value(rc);
  delete promise;
}

// Every call site passes a literal "what", e.g. "create /warden/g/n/x-…".
Errc errc_of(int rc) {
  switch (rc) {
    case ZCONNECTIONLOSS:
    case ZSESSIONEXPIRED:
    case ZSESSIONMOVED:
    case ZCLOSING:
    case ZINVALIDSTATE:
      return Errc::unavailable;
    case ZOPERATIONTIMEOUT:
      return Errc::deadline_exceeded;
    case ZNOAUTH:
    case ZAUTHFAILED:
      return Errc::permission_denied;
    case ZBADARGUMENTS:
      return Errc::invalid_argument;
    default:
      return Errc::internal;
  }
}

}  // namespace

void throw_zk_error(int rc, const std::string& what) {
  throw Error(errc_of(rc), what + ": ZooKeeper: " + zerror(rc));
}

ZkSession::ZkSession(const ZkConfig& config, SessionListener* listener)
    : config_(config), listener_(listener) {
  acl_entries_[0].perms = ZOO_PERM_ALL;
  acl_entries_[0].id.scheme = const_cast<char*>("auth");
  acl_entries_[0].id.id = const_cast<char*>("");
  acl_entries_[1].perms = ZOO_PERM_READ;
  acl_entries_[1].id.scheme = const_cast<char*>("world");
  acl_entries_[1].id.id = const_cast<char*>("anyone");
  acl_.count = 2;
  acl_.data = acl_entries_;

  // The C client's own log (every refused connect, at ERROR level) goes nowhere: warden
  // reports what matters as errors and lost signals.
  handle_ = zookeeper_init2(config_.hosts.c_str(), &ZkSession::on_watch,
                            static_cast<int>(config_.session_timeout.count()), nullptr, this, 0,
                            [](const char*) {});
  if (handle_ == nullptr) {
    throw Error(Errc::invalid_argument, "zk:// cannot use the hosts '" + config_.hosts + "'");
  }
  {
    std::unique_lock lock(mu_);
    if (!changed_.wait_for(lock, config_.op_timeout,
                           [&] { return state_ == SessionState::connected; })) {
      lock.unlock();
      zookeeper_close(handle_);
      throw Error(Errc::unavailable, "no ZooKeeper server of " + config_.hosts +
                                         " answered within " +
                                         std::to_string(config_.op_timeout.count()) + " ms");
    }
  }
  if (config_.user) {
    const std::string credentials = *config_.user + ':' + *config_.password;
    auto [done, future] = promised<ExistsResult>();
    auto* call = new Call<ExistsResult>{std::move(done)};
    const int rc = zoo_add_auth(
        handle_, "digest", credentials.data(), static_cast<int>(credentials.size()),
        [](int result, const void* data) {
          fail(static_cast<Call<ExistsResult>*>(const_cast<void*>(data)), result);
        },
        call);
    int result = rc;
    if (rc == ZOK) {
      result = future.wait_for(config_.op_timeout) == std::future_status::ready ? future.get().rc
                                                                                : ZOPERATIONTIMEOUT;
    } else {
      delete call;
    }
    if (result != ZOK) {
      zookeeper_close(handle_);
      throw_zk_error(result, "digest auth as '" + *config_.user + "'");
    }
  }
}

ZkSession::~ZkSession() { zookeeper_close(handle_); }

void ZkSession::on_watch(zhandle_t*, int type, int state, const char* path, void* context) {
  auto* self = static_cast<ZkSession*>(context);
  if (type == ZOO_SESSION_EVENT) {
    if (state == ZOO_CONNECTED_STATE) {
      self->set_state(SessionState::connected);
    } else if (state == ZOO_CONNECTING_STATE || state == ZOO_ASSOCIATING_STATE) {
      self->set_state(SessionState::suspended);
    } else if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE) {
      self->set_state(SessionState::expired);
    }
    return;
  }
  if (path != nullptr && self->listener_ != nullptr) self->listener_->on_node_event(path);
}

void ZkSession::set_state(SessionState state) {
  {
    std::lock_guard lock(mu_);
    if (state_ == state || state_ == SessionState::expired) return;
    state_ = state;
  }
  changed_.notify_all();
  if (listener_ != nullptr) listener_->on_state(*this, state);
}

SessionState ZkSession::state() const {
  std::lock_guard lock(mu_);
  return state_;
}

SessionState ZkSession::wait_while_suspended(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  changed_.wait_for(lock, timeout, [&] { return state_ != SessionState::suspended; });
  return state_;
}

std::int64_t ZkSession::id() const {
  const clientid_t* client = zoo_client_id(handle_);
  return client != nullptr ? client->client_id : 0;
}

std::chrono::milliseconds ZkSession::timeout() const {
  return std::chrono::milliseconds(zoo_recv_timeout(handle_));
}

const ACL_vector* ZkSession::acl() const { return config_.user ? &acl_ : &ZOO_OPEN_ACL_UNSAFE; }

void ZkSession::create(const std::string& path, const std::string& value, int mode,
                       std::function<void(CreateResult)> done) {
  auto* call = new Call<CreateResult>{std::move(done)};
  const int rc = zoo_acreate2(
      handle_, path.c_str(), value.data(), static_cast<int>(value.size()), acl(), mode,
      [](int result, const char* created, const Stat* stat, const void* data) {
        CreateResult out;
        out.rc = result;
        if (result == ZOK) {
          out.path = created != nullptr ? created : "";
          out.czxid = stat != nullptr ? stat->czxid : 0;
        }
        finish(data, std::move(out));
      },
      call);
  if (rc != ZOK) fail(call, rc);
}

std::future<CreateResult> ZkSession::create(const std::string& path, const std::string& value,
                                            int mode) {
  auto [done, future] = promised<CreateResult>();
  create(path, value, mode, std::move(done));
  return std::move(future);
}

void ZkSession::children(const std::string& path, bool watch,
                         std::function<void(ChildrenResult)> done) {
  auto* call = new Call<ChildrenResult>{std::move(done)};
  const int rc = zoo_aget_children(
      handle_, path.c_str(), watch ? 1 : 0,
      [](int result, const String_vector* strings, const void* data) {
        ChildrenResult out;
        out.rc = result;
        if (result == ZOK && strings != nullptr) {
          out.children.reserve(static_cast<std::size_t>(strings->count));
          for (int i = 0; i < strings->count; ++i) out.children.emplace_back(strings->data[i]);
        }
        finish(data, std::move(out));
      },
      call);
  if (rc != ZOK) fail(call, rc);
}

std::future<ChildrenResult> ZkSession::children(const std::string& path, bool watch) {
  auto [done, future] = promised<ChildrenResult>();
  children(path, watch, std::move(done));
  return std::move(future);
}

void ZkSession::exists(const std::string& path, bool watch,
                       std::function<void(ExistsResult)> done) {
  auto* call = new Call<ExistsResult>{std::move(done)};
  const int rc = zoo_aexists(
      handle_, path.c_str(), watch ? 1 : 0,
      [](int result, const Stat* stat, const void* data) {
        ExistsResult out;
        out.rc = result;
        if (result == ZOK && stat != nullptr) out.czxid = stat->czxid;
        finish(data, out);
      },
      call);
  if (rc != ZOK) fail(call, rc);
}

std::future<ExistsResult> ZkSession::exists(const std::string& path, bool watch) {
  auto [done, future] = promised<ExistsResult>();
  exists(path, watch, std::move(done));
  return std::move(future);
}

std::future<int> ZkSession::sync(const std::string& path) {
  return result_code_call([&](const void* call) {
    return zoo_async(
        handle_, path.c_str(), [](int rc, const char*, const void* data) { answer(rc, data); },
        call);
  });
}

std::future<GetResult> ZkSession::get(const std::string& path) {
  auto [done, future] = promised<GetResult>();
  auto* call = new Call<GetResult>{std::move(done)};
  const int rc = zoo_aget(
      handle_, path.c_str(), 0,
      [](int result, const char* value, int length, const Stat* stat, const void* data) {
        GetResult out;
        out.rc = result;
        if (result == ZOK) {
          if (value != nullptr && length > 0)
            out.data.assign(value, static_cast<std::size_t>(length));
          if (stat != nullptr) {
            out.czxid = stat->czxid;
            out.version = stat->version;
          }
        }
        finish(data, std::move(out));
      },
      call);
  if (rc != ZOK) fail(call, rc);
  return std::move(future);
}

std::future<int> ZkSession::set(const std::string& path, const std::string& data,
                                std::int32_t version) {
  return result_code_call([&](const void* call) {
    return zoo_aset(
        handle_, path.c_str(), data.data(), static_cast<int>(data.size()), version,
        [](int rc, const Stat*, const void* context) { answer(rc, context); }, call);
  });
}

std::future<int> ZkSession::remove(const std::string& path) {
  return result_code_call([&](const void* call) {
    return zoo_adelete(
        handle_, path.c_str(), -1, [](int rc, const void* data) { answer(rc, data); }, call);
  });
}

void ZkSession::remove(const std::string& path, std::function<void(int)> done) {
  auto* call = new std::function<void(int)>(std::move(done));
  const int rc = zoo_adelete(
      handle_, path.c_str(), -1,
      [](int result, const void* data) {
        auto* answered = static_cast<std::function<void(int)>*>(const_cast<void*>(data));
        (*answered)(result);
        delete answered;
      },
      call);
  if (rc != ZOK) {
    (*call)(rc);
    delete call;
  }
}

}  // namespace warden::engines::zookeeper

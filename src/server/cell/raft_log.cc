#include "server/cell/raft_log.h"

#include <arpa/inet.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

// libraft 0.15's headers have no extern "C" of their own.
extern "C" {
#include <raft.h>
#include <raft/uv.h>
}

#include "core/uri.h"
#include "warden/error.h"

namespace warden::server::cell {

// raft_apply and raft_barrier name a function and a struct: the function hides the struct.
using RaftApply = struct raft_apply;
using RaftBarrier = struct raft_barrier;
using RaftChange = struct raft_change;

namespace {

constexpr std::size_t kFrameHeader = 4;
// How often the transport's sockets are looked at for TCP_NODELAY (see on_nodelay).
constexpr std::uint64_t kNoDelayEvery = 20;  // ms

Error invalid(const std::string& what) { return Error(Errc::invalid_argument, "cell: " + what); }

bool ipv4_address(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) return false;
  in_addr ip{};
  if (::inet_pton(AF_INET, address.substr(0, colon).c_str(), &ip) != 1) return false;
  return core::parse_int_in_range(std::string_view(address).substr(colon + 1), 1, 65535)
      .has_value();
}

void check_config(const RaftLogConfig& config) {
  if (config.members.empty()) throw invalid("no members");
  std::set<std::uint64_t> ids;
  bool self = false;
  for (const Member& m : config.members) {
    if (m.id == 0) throw invalid("member ids start at 1");
    if (!ids.insert(m.id).second) throw invalid("member " + std::to_string(m.id) + " given twice");
    if (!ipv4_address(m.address)) {
      throw invalid("member " + std::to_string(m.id) + ": '" + m.address +
                    "' is not an IPv4 address and port (a.b.c.d:port)");
    }
    self = self || m.id == config.id;
  }
  if (!self) throw invalid("this member's id " + std::to_string(config.id) + " is not a member");
  if (config.heartbeat.count() <= 0 || config.heartbeat >= config.election_timeout) {
    throw invalid("the heartbeat (" + std::to_string(config.heartbeat.count()) +
                  " ms) must be shorter than the election timeout (" +
                  std::to_string(config.election_timeout.count()) + " ms)");
  }
  if (config.data_dir.empty()) throw invalid("no data directory");
}

const Member& self_of(const RaftLogConfig& config) {
  return *std::find_if(config.members.begin(), config.members.end(),
                       [&](const Member& m) { return m.id == config.id; });
}

// Once per process: a peer gone mid-write must not end it, and each process's election
// timers must draw differently.
void prepare_process() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::signal(SIGPIPE, SIG_IGN);
    std::srand(static_cast<unsigned>(::getpid()) ^ static_cast<unsigned>(std::time(nullptr)));
  });
}

}  // namespace

std::string frame_entry(std::string_view entry) {
  const auto length = static_cast<std::uint32_t>(entry.size());
  const std::size_t framed = (kFrameHeader + entry.size() + 7) / 8 * 8;
  std::string out(framed, '\0');
  for (std::size_t i = 0; i < kFrameHeader; ++i) out[i] = static_cast<char>(length >> (8 * i));
  std::memcpy(out.data() + kFrameHeader, entry.data(), entry.size());
  return out;
}

std::optional<std::string_view> unframe_entry(std::string_view framed) {
  if (framed.size() < kFrameHeader || framed.size() % 8 != 0) return std::nullopt;
  std::uint32_t length = 0;
  for (std::size_t i = 0; i < kFrameHeader; ++i) {
    length |= static_cast<std::uint32_t>(static_cast<unsigned char>(framed[i])) << (8 * i);
  }
  if (length > framed.size() - kFrameHeader) return std::nullopt;
  if ((kFrameHeader + length + 7) / 8 * 8 != framed.size()) return std::nullopt;
  return framed.substr(kFrameHeader, length);
}

struct RaftLog::Loop {
  Loop(RaftLogConfig c, StateMachine& m) : config(std::move(c)), machine(m) {}

  struct Proposal {
    RaftApply request{};
    ProposeDone done;
  };
  // A membership change under way: an addition goes on from raft_add to raft_assign.
  struct Change {
    Loop* loop = nullptr;
    RaftChange request{};
    ChangeDone done;
    std::uint64_t id = 0;
    bool promote = false;    // an addition whose spare is still to be made a voter
    bool assigning = false;  // that spare is being made a voter (it catches up first)
  };

  RaftLogConfig config;
  StateMachine& machine;

  // The loop thread's own once started.
  uv_loop_t loop{};
  struct raft_uv_transport transport {};
  struct raft_io io {};
  struct raft_fsm fsm {};
  struct raft raft {};
  uv_async_t wake{};
  uv_check_t check{};
  uv_timer_t nodelay{};
  RaftBarrier barrier{};
  raft_term barrier_term = 0;    // the term whose barrier was asked for last
  bool barrier_pending = false;  // `barrier` is the library's until its callback
  bool closing = false;
  raft_index configuration_seen = 0;  // the configuration known_members was taken from
  raft_index configuration_committed_seen = 0;
  std::thread thread;

  mutable std::mutex mu;  // guards what follows, read by other threads
  std::vector<std::pair<std::string, ProposeDone>> queued;
  std::vector<std::function<void()>> tasks;  // run on the loop thread (membership)
  std::vector<Member> known_members;
  bool stopping = false;
  std::optional<Leader> known_leader;
  bool ready = false;  // leading, with an entry of its own term committed
  std::uint64_t applied = 0;

  static Loop& of(uv_handle_t* handle) { return *static_cast<Loop*>(handle->data); }

  static void tell(const ProposeDone& done, Proposed what, std::uint64_t index) {
    try {
      done(what, index);
    } catch (...) {
      // Nobody above the loop to catch it; the loop goes on.
    }
  }

  static int fsm_apply(struct raft_fsm* fsm, const struct raft_buffer* buf, void** result) {
    Loop& self = *static_cast<Loop*>(fsm->data);
    *result = nullptr;
    const auto entry = unframe_entry({static_cast<const char*>(buf->base), buf->len});
    // Not an entry this class wrote: the log is damaged. Applying stops here (the
    // library retries it) rather than diverge from the other members.
    if (!entry) return RAFT_CORRUPT;
    // The library counts an entry applied once this returns: this is the next one.
    try {
      self.machine.apply(*entry, raft_last_applied(&self.raft) + 1);
    } catch (...) {
      std::terminate();  // a StateMachine must not throw: the members would diverge
    }
    return 0;
  }

  static int fsm_snapshot(struct raft_fsm* fsm, struct raft_buffer* bufs[], unsigned* n_bufs) {
    Loop& self = *static_cast<Loop*>(fsm->data);
    std::string state;
    try {
      state = self.machine.snapshot();
    } catch (...) {
      return RAFT_BUSY;  // skipped: the next threshold asks again
    }
    auto* array = static_cast<struct raft_buffer*>(raft_malloc(sizeof(struct raft_buffer)));
    if (array == nullptr) return RAFT_NOMEM;
    array[0].len = state.size();
    array[0].base = raft_malloc(std::max<std::size_t>(state.size(), 1));
    if (array[0].base == nullptr) {
      raft_free(array);
      return RAFT_NOMEM;
    }
    std::memcpy(array[0].base, state.data(), state.size());
    *bufs = array;  // the library frees both
    *n_bufs = 1;
    return 0;
  }

  static int fsm_restore(struct raft_fsm* fsm, struct raft_buffer* buf) {
    Loop& self = *static_cast<Loop*>(fsm->data);
    int rv = 0;
    try {
      self.machine.restore({static_cast<const char*>(buf->base), buf->len});
    } catch (...) {
      rv = RAFT_CORRUPT;
    }
    raft_free(buf->base);  // the restore owns it
    return rv;
  }

  static void applied_cb(RaftApply* request, int status, void* /*result*/) {
    std::unique_ptr<Proposal> proposal(static_cast<Proposal*>(request->data));
    const Proposed what = status == 0                ? Proposed::committed
                          : status == RAFT_NOTLEADER ? Proposed::not_leader
                                                     : Proposed::lost;
    tell(proposal->done, what, request->index);
  }

  void submit(std::string entry, ProposeDone done) {
    if (closing) {
      tell(done, Proposed::lost, 0);
      return;
    }
    if (raft_state(&raft) != RAFT_LEADER) {
      tell(done, Proposed::not_leader, 0);
      return;
    }
    const std::string framed = frame_entry(entry);
    struct raft_buffer buf {};
    buf.len = framed.size();
    buf.base = raft_malloc(framed.size());
    if (buf.base == nullptr) {
      tell(done, Proposed::lost, 0);
      return;
    }
    std::memcpy(buf.base, framed.data(), framed.size());
    auto proposal = std::make_unique<Proposal>();
    proposal->request.data = proposal.get();
    proposal->done = std::move(done);
    const int rv = raft_apply(&raft, &proposal->request, &buf, 1, applied_cb);
    if (rv != 0) {
      raft_free(buf.base);  // not taken
      tell(proposal->done, rv == RAFT_NOTLEADER ? Proposed::not_leader : Proposed::lost, 0);
      return;
    }
    proposal.release();  // applied_cb has it
  }

  static std::string change_error(int rv, const char* what) {
    return std::string(what) + ": " + raft_strerror(rv);
  }

  // Starts a membership change (on the loop thread).
  void change(std::unique_ptr<Change> c, const std::string& address) {
    c->loop = this;
    c->request.data = c.get();
    int rv = 0;
    if (closing) {
      rv = RAFT_SHUTDOWN;
    } else if (!address.empty()) {
      c->promote = true;
      rv = raft_add(&raft, &c->request, c->id, address.c_str(), on_changed);
    } else {
      rv = raft_remove(&raft, &c->request, c->id, on_changed);
    }
    if (rv != 0) {
      c->done(
          change_error(rv, address.empty() ? "cannot remove the member" : "cannot add the member"));
      return;
    }
    c.release();  // on_changed has it
  }

  static void on_changed(RaftChange* request, int status) {
    std::unique_ptr<Change> c(static_cast<Change*>(request->data));
    Loop& self = *c->loop;
    if (status != 0) {
      c->done(change_error(status, c->promote     ? "the member was not added"
                                   : c->assigning ? "the member was added as a spare but did "
                                                    "not catch up with the log to vote"
                                                  : "the change was not committed"));
      return;
    }
    if (c->promote) {
      c->promote = false;
      c->assigning = true;
      const int rv = raft_assign(&self.raft, &c->request, c->id, RAFT_VOTER, on_changed);
      if (rv != 0) {
        c->done(change_error(rv, "the member was added as a spare but not made a voter"));
        return;
      }
      c.release();
      return;
    }
    c->done("");
  }

  static void on_wake(uv_async_t* handle) {
    Loop& self = of(reinterpret_cast<uv_handle_t*>(handle));
    std::vector<std::pair<std::string, ProposeDone>> batch;
    std::vector<std::function<void()>> tasks;
    bool stop = false;
    {
      std::lock_guard guard(self.mu);
      batch.swap(self.queued);
      tasks.swap(self.tasks);
      stop = self.stopping;
    }
    for (auto& task : tasks) task();
    if (stop && !self.closing) {
      self.closing = true;
      // Proposals under way are told `lost` by the library as it closes.
      raft_close(&self.raft, on_raft_closed);
    }
    for (auto& [entry, done] : batch) self.submit(std::move(entry), std::move(done));
  }

  static void on_raft_closed(struct raft* r) {
    Loop& self = *static_cast<Loop*>(r->data);
    uv_close(reinterpret_cast<uv_handle_t*>(&self.wake), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&self.check), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&self.nodelay), nullptr);
  }

  // libraft 0.15's TCP transport leaves Nagle's algorithm on: a small AppendEntries (or
  // its answer) behind another unacknowledged one then waits for the peer's delayed ACK,
  // 40 ms on Linux, and so does every reply behind it (measured: a cell's p99 acquire
  // 34-44 ms against 1.5 ms). Its sockets are the loop's TCP handles: each is told
  // TCP_NODELAY, those of new connections within kNoDelayEvery.
  static void on_nodelay(uv_timer_t* handle) {
    uv_walk(
        handle->loop,
        [](uv_handle_t* h, void*) {
          if (h->type == UV_TCP && uv_is_closing(h) == 0) {
            uv_tcp_nodelay(reinterpret_cast<uv_tcp_t*>(h), 1);
          }
        },
        nullptr);
  }

  static void on_barrier(RaftBarrier* request, int status) {
    Loop& self = *static_cast<Loop*>(request->data);
    self.barrier_pending = false;
    if (status != 0 || self.closing) return;
    std::lock_guard guard(self.mu);
    self.ready =
        raft_state(&self.raft) == RAFT_LEADER && self.raft.current_term == self.barrier_term;
  }

  // After every turn of the loop: what other threads read, and a new leader's barrier.
  // (libraft 0.15 tells nobody of a change of leader, and appends no entry of a new
  // leader's own term: until one commits, entries of earlier terms may not be applied.)
  static void on_check(uv_check_t* handle) {
    Loop& self = of(reinterpret_cast<uv_handle_t*>(handle));
    if (self.closing) return;
    const bool leads = raft_state(&self.raft) == RAFT_LEADER;
    if (leads && !self.barrier_pending && self.barrier_term != self.raft.current_term) {
      self.barrier_term = self.raft.current_term;
      self.barrier.data = &self;
      self.barrier_pending = raft_barrier(&self.raft, &self.barrier, on_barrier) == 0;
      if (!self.barrier_pending) self.barrier_term = 0;  // asked again after the next turn
    }
    raft_id id = 0;
    const char* address = nullptr;
    raft_leader(&self.raft, &id, &address);
    std::vector<Member> members;
    const bool reconfigured =
        self.raft.configuration_uncommitted_index != self.configuration_seen ||
        self.raft.configuration_index != self.configuration_committed_seen;
    if (reconfigured) {
      self.configuration_seen = self.raft.configuration_uncommitted_index;
      self.configuration_committed_seen = self.raft.configuration_index;
      for (unsigned i = 0; i < self.raft.configuration.n; ++i) {
        const struct raft_server& server = self.raft.configuration.servers[i];
        if (server.role == RAFT_VOTER) members.push_back({server.id, server.address});
      }
    }
    std::lock_guard guard(self.mu);
    if (reconfigured) self.known_members = std::move(members);
    if (id != 0 && address != nullptr) {
      self.known_leader = Leader{id, address};
    } else {
      self.known_leader.reset();
    }
    if (!leads) self.ready = false;
    self.applied = raft_last_applied(&self.raft);
  }

  // Runs the loop until every handle is closed, then frees what the library allocated.
  void run_to_end() {
    uv_run(&loop, UV_RUN_DEFAULT);
    raft_uv_close(&io);
    raft_uv_tcp_close(&transport);
    uv_loop_close(&loop);
  }

  void start() {
    const Member& self = self_of(config);
    std::error_code ec;
    std::filesystem::create_directories(config.data_dir, ec);
    if (ec) {
      throw Error(Errc::unavailable, "cell: cannot make the data directory " +
                                         config.data_dir.string() + ": " + ec.message());
    }
    if (const int rv = uv_loop_init(&loop); rv != 0) {
      throw Error(Errc::unavailable, std::string("cell: no event loop: ") + uv_strerror(rv));
    }
    if (const int rv = raft_uv_tcp_init(&transport, &loop); rv != 0) {
      uv_loop_close(&loop);
      throw Error(Errc::unavailable, std::string("cell: no transport: ") + raft_strerror(rv));
    }
    const std::string dir = config.data_dir.string();
    if (const int rv = raft_uv_init(&io, &loop, dir.c_str(), &transport); rv != 0) {
      raft_uv_tcp_close(&transport);
      uv_loop_close(&loop);
      throw Error(Errc::unavailable, "cell: cannot use " + dir + ": " + raft_strerror(rv));
    }
    raft_uv_set_segment_size(&io, config.segment_bytes);
    fsm.version = 1;
    fsm.data = this;
    fsm.apply = fsm_apply;
    fsm.snapshot = fsm_snapshot;
    fsm.restore = fsm_restore;
    if (const int rv = raft_init(&raft, &io, &fsm, config.id, self.address.c_str()); rv != 0) {
      const std::string why = raft_errmsg(&raft);
      raft_uv_close(&io);
      raft_uv_tcp_close(&transport);
      uv_loop_close(&loop);
      throw Error(Errc::unavailable, "cell: " + dir + ": " + why);
    }
    raft.data = this;
    raft_set_election_timeout(&raft, static_cast<unsigned>(config.election_timeout.count()));
    raft_set_heartbeat_timeout(&raft, static_cast<unsigned>(config.heartbeat.count()));
    raft_set_snapshot_threshold(&raft, config.snapshot_threshold);
    raft_set_snapshot_trailing(&raft, config.snapshot_trailing);

    std::string failure;
    struct raft_configuration members {};
    raft_configuration_init(&members);
    for (const Member& m : config.members) {
      if (raft_configuration_add(&members, m.id, m.address.c_str(), RAFT_VOTER) != 0) {
        failure = "cannot list member " + std::to_string(m.id);
      }
    }
    if (failure.empty() && !config.join) {
      // A data directory with a log already is a restart: its log knows the members.
      const int rv = raft_bootstrap(&raft, &members);
      if (rv != 0 && rv != RAFT_CANTBOOTSTRAP) failure = raft_errmsg(&raft);
    }
    raft_configuration_close(&members);
    if (failure.empty() && raft_start(&raft) != 0) failure = raft_errmsg(&raft);
    uv_async_init(&loop, &wake, on_wake);
    wake.data = this;
    uv_check_init(&loop, &check);
    check.data = this;
    uv_timer_init(&loop, &nodelay);
    nodelay.data = this;
    if (!failure.empty()) {
      closing = true;
      raft_close(&raft, on_raft_closed);
      run_to_end();
      throw Error(Errc::unavailable, "cell: member " + std::to_string(config.id) + " at " +
                                         self.address + ": " + failure);
    }
    uv_check_start(&check, on_check);
    uv_timer_start(&nodelay, on_nodelay, 0, kNoDelayEvery);
    thread = std::thread([this] { run_to_end(); });
  }
};

RaftLog::RaftLog(RaftLogConfig config, StateMachine& machine) {
  check_config(config);
  prepare_process();
  loop_ = std::make_unique<Loop>(std::move(config), machine);
  loop_->start();
}

RaftLog::~RaftLog() {
  {
    std::lock_guard guard(loop_->mu);
    loop_->stopping = true;
  }
  uv_async_send(&loop_->wake);
  loop_->thread.join();
}

void RaftLog::propose(std::string entry, ProposeDone done) {
  {
    std::lock_guard guard(loop_->mu);
    if (!loop_->stopping) {
      loop_->queued.emplace_back(std::move(entry), std::move(done));
      entry.clear();
      done = nullptr;
    }
  }
  if (done) {
    Loop::tell(done, Proposed::lost, 0);  // closing: nothing will be appended
    return;
  }
  uv_async_send(&loop_->wake);
}

void RaftLog::add_member(Member member, ChangeDone done) {
  if (member.address.empty()) {
    done("cannot add the member: no address");
    return;
  }
  post_change(member.id, std::move(member.address), std::move(done));
}

void RaftLog::remove_member(std::uint64_t id, ChangeDone done) {
  post_change(id, "", std::move(done));
}

void RaftLog::post_change(std::uint64_t id, std::string address, ChangeDone done) {
  Loop* loop = loop_.get();
  auto change = std::make_shared<Loop::Change>();
  change->id = id;
  change->done = std::move(done);
  bool queued = false;
  {
    std::lock_guard guard(loop->mu);
    if (!loop->stopping) {
      loop->tasks.emplace_back([loop, change, address = std::move(address)] {
        loop->change(std::make_unique<Loop::Change>(std::move(*change)), address);
      });
      queued = true;
    }
  }
  if (!queued) {
    change->done("the member is stopping");
    return;
  }
  uv_async_send(&loop->wake);
}

std::vector<Member> RaftLog::members() const {
  std::lock_guard guard(loop_->mu);
  return loop_->known_members;
}

std::optional<RaftLog::Leader> RaftLog::leader() const {
  std::lock_guard guard(loop_->mu);
  return loop_->known_leader;
}

bool RaftLog::leading() const {
  std::lock_guard guard(loop_->mu);
  return loop_->ready;
}

std::uint64_t RaftLog::applied_index() const {
  std::lock_guard guard(loop_->mu);
  return loop_->applied;
}

}  // namespace warden::server::cell

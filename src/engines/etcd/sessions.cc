#include "engines/etcd/sessions.h"

#include <algorithm>
#include <utility>

#include "engines/etcd/lock_keys.h"
#include "warden/error.h"

namespace warden::engines::etcd {
namespace {

using std::chrono::milliseconds;

// Whole seconds, rounded up: etcd's lease TTL unit.
std::int64_t lease_seconds(milliseconds ttl) {
  return std::max<std::int64_t>(1, (ttl.count() + 999) / 1000);
}

// How soon a failed keep-alive round is tried again.
milliseconds retry_delay(milliseconds ttl) {
  return std::clamp(ttl / 10, milliseconds(20), milliseconds(500));
}

}  // namespace

Sessions::Sessions(std::shared_ptr<EtcdRpc> rpc, const EtcdConfig& config, LostSink on_lost)
    : rpc_(std::move(rpc)),
      config_(config),
      on_lost_(std::move(on_lost)),
      keeper_([this](std::stop_token stop) { keeper_loop(std::move(stop)); }) {}

Sessions::~Sessions() {
  keeper_.request_stop();
  if (keeper_.joinable()) keeper_.join();
  std::vector<std::int64_t> leases;
  {
    std::lock_guard lock(mu_);
    if (!reachable_) return;  // each revoke would wait out op_timeout on every member
    for (const auto& [lease, entry] : entries_) leases.push_back(lease);
    entries_.clear();
  }
  // Revoking deletes every key of the Client at once: its waits and any grant still
  // held end now rather than a TTL later.
  for (const std::int64_t lease : leases) {
    try {
      rpc_->lease_revoke(lease);
    } catch (const Error&) {
      break;  // unreachable after all: the leases end by their TTL
    }
  }
}

std::shared_ptr<const Session> Sessions::begin(milliseconds ttl, const std::string& named_under) {
  // With the watchdog off every request has a lease of its own anyway.
  bool pooled = config_.watchdog;
  if (pooled) {
    std::unique_lock lock(mu_);
    const auto give_up = Clock::now() + config_.op_timeout;
    while (true) {
      const auto shared = by_ttl_.find(ttl);
      if (shared == by_ttl_.end()) break;
      const auto found = entries_.find(shared->second);
      // A session whose keep-alives failed past its expiry may be gone on the server:
      // new requests go to a new one (the keeper still settles the old one).
      if (found == entries_.end() || found->second.expires <= Clock::now()) {
        by_ttl_.erase(shared);
        break;
      }
      Entry& entry = found->second;
      if (!named_under.empty()) {
        const std::string key = named_under + lease_hex(shared->second);
        // This Client's release of that very key is under way (unlock() sends it without
        // waiting): the lock is not free before that delete lands anyway, so wait for it
        // rather than queue behind it on a lease of its own.
        if (entry.releasing.count(key) != 0 && Clock::now() < give_up) {
          names_freed_.wait_until(lock, give_up);
          continue;  // the session may be gone meanwhile
        }
        // Another request of this Client on the same lock has (or may still have) the
        // key this one would be: it gets a lease of its own.
        if (!entry.named.insert(key).second) {
          pooled = false;
          break;
        }
      }
      ++entry.waiters;
      return entry.session;
    }
  }
  EtcdRpc::Sent sent;
  const auto response = rpc_->lease_grant(lease_seconds(ttl), &sent);
  auto session = std::make_shared<Session>(Session{response.id(), ttl, pooled, config_.watchdog});
  Entry entry;
  entry.session = session;
  entry.expires = sent.at + std::min(ttl, milliseconds(response.ttl() * 1000));
  entry.next_keep_alive = sent.at + ttl / 3;
  entry.waiters = 1;
  entry.idle_since = Clock::now();
  if (pooled && !named_under.empty()) entry.named.insert(named_under + lease_hex(session->lease));
  {
    std::lock_guard lock(mu_);
    entries_.emplace(session->lease, std::move(entry));
    // Two threads that raced here both keep theirs; the other one goes idle and is
    // revoked after kIdleLinger.
    if (pooled) by_ttl_[ttl] = session->lease;
    ++changes_;  // the keeper may have to wake earlier for this session
  }
  wake_.notify_all();
  return session;
}

std::shared_ptr<const Session> Sessions::join(milliseconds ttl) {
  if (!config_.watchdog) return nullptr;
  std::lock_guard lock(mu_);
  const auto shared = by_ttl_.find(ttl);
  if (shared == by_ttl_.end()) return nullptr;
  const auto found = entries_.find(shared->second);
  // As begin(): one whose keep-alives failed past its expiry may be gone on the server.
  if (found == entries_.end() || found->second.expires <= Clock::now()) {
    by_ttl_.erase(shared);
    return nullptr;
  }
  ++found->second.waiters;
  return found->second.session;
}

bool Sessions::granted(const Session& session, const std::string& key, const core::GrantRef& grant,
                       Clock::time_point expires) {
  std::lock_guard lock(mu_);
  const auto entry = entries_.find(session.lease);
  if (entry == entries_.end()) return false;
  --entry->second.waiters;
  entry->second.holders.emplace(key, Holding{grant, expires});
  return true;
}

Sessions::Renewal Sessions::renewed(std::int64_t lease, const std::string& key,
                                    Clock::time_point expires) {
  std::lock_guard lock(mu_);
  const auto entry = entries_.find(lease);
  if (entry == entries_.end()) return Renewal::gone;
  const auto holding = entry->second.holders.find(key);
  if (holding == entry->second.holders.end()) return Renewal::gone;
  if (expires <= holding->second.reported) return Renewal::stale;
  holding->second.reported = expires;
  return Renewal::advanced;
}

void Sessions::lose(std::int64_t lease) {
  std::unique_lock lock(mu_);
  lose_locked(lock, lease);
}

bool Sessions::withdrawn(const std::shared_ptr<const Session>& session, const std::string& key,
                         Clock::time_point until) {
  {
    std::lock_guard lock(mu_);
    if (const auto entry = entries_.find(session->lease); entry != entries_.end()) {
      if (--entry->second.waiters == 0 && entry->second.holders.empty()) {
        entry->second.idle_since = Clock::now();
      }
      // An own lease has nothing else on it: revoking it deletes the key.
      if (!session->shared) entries_.erase(entry);
    }
  }
  if (key.empty() && session->shared) return true;
  const Withdrawal withdrawal{
      key, 0, session->lease, !session->shared,
      Clock::now() + std::chrono::seconds(lease_seconds(session->ttl)) + config_.op_timeout};
  try {
    if (Clock::now() >= until) throw Error(Errc::deadline_exceeded, "no time left to withdraw");
    const EtcdRpc::Bound bound{until, {}};
    if (withdrawal.revoke) {
      rpc_->lease_revoke(withdrawal.lease, bound);
    } else {
      delete_key(withdrawal.key, withdrawal.revision, bound);
      std::lock_guard lock(mu_);
      unname_locked(withdrawal.lease, withdrawal.key);
    }
    return true;
  } catch (const Error&) {
    std::lock_guard lock(mu_);
    withdrawals_.push_back(withdrawal);
    return false;
  }
}

void Sessions::released(std::int64_t lease, const std::string& key) {
  bool revoke = false;
  {
    std::lock_guard lock(mu_);
    const auto entry = entries_.find(lease);
    if (entry == entries_.end()) return;
    entry->second.holders.erase(key);
    entry->second.named.erase(key);
    entry->second.releasing.erase(key);
    names_freed_.notify_all();
    if (!entry->second.session->shared) {
      entries_.erase(entry);
      revoke = true;
    } else if (entry->second.holders.empty() && entry->second.waiters == 0) {
      entry->second.idle_since = Clock::now();
    }
  }
  if (revoke) {
    try {
      rpc_->lease_revoke(lease);
    } catch (const Error&) {
      // The key is already deleted; the lease ends by its TTL.
    }
  }
}

void Sessions::releasing(std::int64_t lease, const std::string& key) {
  std::lock_guard lock(mu_);
  const auto entry = entries_.find(lease);
  if (entry != entries_.end() && entry->second.holders.count(key) != 0) {
    entry->second.releasing.insert(key);
  }
}

void Sessions::release_failed(std::int64_t lease, const std::string& key) {
  std::lock_guard lock(mu_);
  const auto entry = entries_.find(lease);
  if (entry != entries_.end() && entry->second.releasing.erase(key) != 0) {
    names_freed_.notify_all();
  }
}

bool Sessions::holds(std::int64_t lease, const std::string& key) const {
  std::lock_guard lock(mu_);
  const auto entry = entries_.find(lease);
  return entry != entries_.end() && entry->second.holders.count(key) != 0;
}

void Sessions::unname_locked(std::int64_t lease, const std::string& key) {
  if (const auto entry = entries_.find(lease); entry != entries_.end()) {
    entry->second.named.erase(key);
  }
  names_freed_.notify_all();
}

std::optional<Clock::time_point> Sessions::expires(std::int64_t lease) const {
  std::lock_guard lock(mu_);
  const auto entry = entries_.find(lease);
  if (entry == entries_.end()) return std::nullopt;
  return entry->second.expires;
}

void Sessions::delete_key(const std::string& key, std::int64_t revision,
                          const EtcdRpc::Bound& bound) {
  etcdserverpb::TxnRequest request;
  if (revision != 0) {
    auto* compare = request.add_compare();
    compare->set_key(key);
    compare->set_target(etcdserverpb::Compare::CREATE);
    compare->set_result(etcdserverpb::Compare::EQUAL);
    compare->set_create_revision(revision);
  }
  request.add_success()->mutable_request_delete_range()->set_key(key);
  rpc_->txn(request, nullptr, {}, bound);
}

void Sessions::keeper_loop(std::stop_token stop) {
  std::unique_lock lock(mu_);
  while (!stop.stop_requested()) {
    keep_alive_due(lock);
    drop_overdue(lock);
    retry_withdrawals(lock, stop);
    revoke_idle(lock, stop);
    auto next = Clock::now() + std::chrono::seconds(1);
    for (const auto& [lease, entry] : entries_) {
      if (entry.session->kept || entry.waiters > 0) {
        next = std::min(next, entry.next_keep_alive);
      }
    }
    if (!withdrawals_.empty()) next = std::min(next, Clock::now() + milliseconds(200));
    const std::uint64_t seen = changes_;
    wake_.wait_until(lock, stop, next, [&] { return changes_ != seen; });
  }
}

void Sessions::keep_alive_due(std::unique_lock<std::mutex>& lock) {
  const auto now = Clock::now();
  std::vector<std::int64_t> due;
  milliseconds shortest = config_.op_timeout;
  for (const auto& [lease, entry] : entries_) {
    if ((entry.session->kept || entry.waiters > 0) && entry.next_keep_alive <= now) {
      due.push_back(lease);
      shortest = std::min(shortest, entry.session->ttl);
    }
  }
  if (due.empty()) return;
  // A round must end in time for a retry on another member before the lease could
  // lapse locally.
  const milliseconds timeout = std::clamp(shortest / 3, milliseconds(50), config_.op_timeout);

  lock.unlock();
  EtcdRpc::Sent sent;
  std::vector<std::int64_t> ttls;
  bool ok = true;
  try {
    ttls = rpc_->keep_alive(due, timeout, &sent);
  } catch (const Error&) {
    ok = false;
  }
  lock.lock();

  reachable_ = ok;
  for (std::size_t i = 0; i < due.size(); ++i) {
    const auto entry = entries_.find(due[i]);
    if (entry == entries_.end()) continue;  // released meanwhile
    const milliseconds ttl = entry->second.session->ttl;
    if (!ok) {
      entry->second.next_keep_alive = Clock::now() + retry_delay(ttl);
    } else if (ttls[i] <= 0) {
      lose_locked(lock, due[i]);
    } else {
      entry->second.expires =
          std::max(entry->second.expires, sent.at + std::min(ttl, milliseconds(ttls[i] * 1000)));
      entry->second.next_keep_alive = sent.at + ttl / 3;
    }
  }
}

void Sessions::drop_overdue(std::unique_lock<std::mutex>& lock) {
  const auto now = Clock::now();
  for (auto it = entries_.begin(); it != entries_.end();) {
    Entry& entry = it->second;
    for (auto holding = entry.holders.begin(); holding != entry.holders.end();) {
      if (holding->second.reported > now) {
        ++holding;
        continue;
      }
      const auto token = static_cast<std::int64_t>(holding->second.grant.token);
      withdrawals_.push_back(Withdrawal{holding->first, token, it->first, !entry.session->shared,
                                        now + entry.session->ttl + config_.op_timeout});
      holding = entry.holders.erase(holding);
      if (entry.holders.empty() && entry.waiters == 0) entry.idle_since = now;
    }
    // An own lease is revoked by its withdrawal; nothing else is on it.
    if (!entry.session->shared && entry.holders.empty() && entry.waiters == 0) {
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
  (void)lock;
}

void Sessions::lose_locked(std::unique_lock<std::mutex>& lock, std::int64_t lease) {
  const auto entry = entries_.find(lease);
  if (entry == entries_.end()) return;
  std::map<std::string, Holding> holders = std::move(entry->second.holders);
  const milliseconds ttl = entry->second.session->ttl;
  entries_.erase(entry);
  if (const auto shared = by_ttl_.find(ttl); shared != by_ttl_.end() && shared->second == lease) {
    by_ttl_.erase(shared);
  }
  names_freed_.notify_all();  // a begin() waiting for a release on it goes to a new session
  lock.unlock();
  for (const auto& [key, holding] : holders) on_lost_(holding.grant);
  lock.lock();
}

void Sessions::retry_withdrawals(std::unique_lock<std::mutex>& lock, const std::stop_token& stop) {
  if (withdrawals_.empty()) return;
  std::vector<Withdrawal> pending = std::move(withdrawals_);
  withdrawals_.clear();
  lock.unlock();
  std::vector<Withdrawal> failed;
  std::vector<Withdrawal> deleted;
  // A Client that closes stops this at once: what is left ends with its sessions.
  const EtcdRpc::Bound bound{Clock::time_point::max(), stop};
  for (Withdrawal& withdrawal : pending) {
    try {
      if (withdrawal.revoke) {
        rpc_->lease_revoke(withdrawal.lease, bound);
      } else {
        delete_key(withdrawal.key, withdrawal.revision, bound);
        deleted.push_back(std::move(withdrawal));
      }
    } catch (const Error&) {
      failed.push_back(std::move(withdrawal));
    }
  }
  lock.lock();
  for (const Withdrawal& withdrawal : deleted) unname_locked(withdrawal.lease, withdrawal.key);
  for (Withdrawal& withdrawal : failed) {
    // A key on a shared session lives while the session does; an own lease, which
    // nobody keeps alive any more, ends by its TTL at the latest.
    const bool needed = withdrawal.revoke ? Clock::now() < withdrawal.give_up
                                          : entries_.count(withdrawal.lease) != 0;
    if (needed) {
      withdrawals_.push_back(std::move(withdrawal));
    }
  }
}

void Sessions::revoke_idle(std::unique_lock<std::mutex>& lock, const std::stop_token& stop) {
  const auto now = Clock::now();
  std::vector<std::int64_t> idle;
  for (auto it = entries_.begin(); it != entries_.end();) {
    const Entry& entry = it->second;
    if (entry.session->shared && entry.waiters == 0 && entry.holders.empty() &&
        now - entry.idle_since > kIdleLinger) {
      if (const auto shared = by_ttl_.find(entry.session->ttl);
          shared != by_ttl_.end() && shared->second == it->first) {
        by_ttl_.erase(shared);
      }
      idle.push_back(it->first);
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
  if (idle.empty()) return;
  lock.unlock();
  for (const std::int64_t lease : idle) {
    try {
      rpc_->lease_revoke(lease, EtcdRpc::Bound{Clock::time_point::max(), stop});
    } catch (const Error&) {
      // It ends by its TTL: nobody keeps it alive any more.
    }
  }
  lock.lock();
}

}  // namespace warden::engines::etcd

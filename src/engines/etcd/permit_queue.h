// engines/etcd/permit_queue.h — a semaphore in etcd's keyspace (docs/primitives.md).
//
//   PREFIX/GROUP/NAME'/p/ID    one key per request for permits, on its session's lease,
//                              valued "warden permits K N CLIENT"
//
// In create_revision order, a request holds once the permits of every earlier request
// plus its own fit in N: no request passes an earlier one, and a request's grant needs
// nothing but the keys before it (the same shape as the lock's queue). A lock's requests
// (w/, s/) and a semaphore's never share a lock: a request that finds an earlier request
// of the other kind, or one naming another N, is refused — both orders end the same way,
// since each request judges only the requests before it, at its own create's revision.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace warden::engines::etcd {

// One request of a lock, as its key and value read.
struct QueuedRequest {
  std::int64_t revision = 0;  // create_revision: queue order and the token
  enum class Kind { exclusive, shared, permits } kind = Kind::exclusive;
  std::uint32_t permits = 0;   // Kind::permits: K
  std::uint32_t capacity = 0;  // Kind::permits: N
  std::string value;           // Kind::exclusive / shared: the candidate's (request_value.h)
};

// The value of a permits request's key.
std::string permits_value(std::uint32_t permits, std::uint32_t capacity, std::string_view client);

// A request from its key's text after the lock's prefix ("w/ID", "s/ID", "p/ID") and its
// value; nullopt for a key that is no request, or a permits key whose value is not one.
// A lock request's value is read for the candidate's value it may carry.
std::optional<QueuedRequest> parse_request(std::string_view rest, std::string_view value,
                                           std::int64_t revision);

enum class Verdict { holds, waits, mismatch };

// A permits request of K of N at `revision`, against the lock's requests (any order);
// only those created before it count.
Verdict judge_permits(const std::vector<QueuedRequest>& requests, std::int64_t revision,
                      std::uint32_t permits, std::uint32_t capacity);

// How many of `queue` (in create_revision order) hold the lock or semaphore: a
// semaphore's leading requests while their permits fit; a lock's exclusive head alone, or
// its leading run of shared requests.
std::size_t holding(const std::vector<QueuedRequest>& queue);

}  // namespace warden::engines::etcd

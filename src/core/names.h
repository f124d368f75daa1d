// core/names.h — validation of lock identities and options (DESIGN §2), done before
// any I/O so that bad input changes nothing.
#pragma once

#include <cstdint>
#include <string_view>

#include "warden/options.h"
#include "warden/types.h"

namespace warden::core {

// group: [A-Za-z0-9._-]{1,64}. Throws Error(invalid_argument) saying why.
void validate_group(std::string_view group);
// name: 1..512 bytes, no NUL. Throws Error(invalid_argument) saying why.
void validate_name(std::string_view name);
// ttl in [10 ms, 7 days], lock_delay in [0, 1 h]. Throws Error(invalid_argument).
void validate_lock_options(const LockOptions& options);
// Throws Error(unsupported) for a mode / fairness / lock-delay the engine lacks.
void require_capabilities(const Capabilities& caps, Mode mode, const LockOptions& options);
// Throws Error(invalid_argument) for options.cache on `what` (a semaphore, an election, a
// multi-lock): only locks are cached.
void refuse_cache(const LockOptions& options, std::string_view what);
// A semaphore of `capacity` permits (1..kMaxPermits) asked for `permits` of them
// (1..capacity). Throws Error(invalid_argument) saying why.
inline constexpr std::uint32_t kMaxPermits = 1'000'000;
void validate_permits(std::uint32_t capacity, std::uint32_t permits);
void validate_capacity(std::uint32_t capacity);
// The most members a multi-lock may have: each is a grant of its own.
inline constexpr std::size_t kMaxMultiMembers = 1024;
// An election's value: any bytes, at most kMaxLeaderValueBytes (warden/election.h).
// Throws Error(invalid_argument).
void validate_leader_value(std::string_view value);
// Throws Error(invalid_argument) for inconsistent client options.
void validate_client_options(const ClientOptions& options);

inline constexpr std::size_t kMaxGroupBytes = 64;
inline constexpr std::size_t kMaxNameBytes = 512;

}  // namespace warden::core

// warden/warden.h — the whole public API of warden, a distributed-lock library.
//
//   client.h      Client::open(uri): one backend connection, watchdog and metrics
//   lock.h        Lock (std Lockable) and Locks (a family of names in one group)
//   lease.h       Lease: move-only RAII grant with fencing token and lost signal
//   semaphore.h   Semaphore: N permits, each grant fenced and leased
//   multi_lock.h  MultiLock: several locks all or nothing, in one global order
//   sequencer.h   "group/name:mode:token" proofs of a grant
//   fence_gate.h  resource-side check that rejects stale writers
//   options.h     ClientOptions, LockOptions, RetryPolicy
//   error.h       Error and Errc, with retry advice
//   types.h       Mode, Wait, Capabilities
#pragma once

#include "warden/client.h"
#include "warden/election.h"
#include "warden/error.h"
#include "warden/fence_gate.h"
#include "warden/lease.h"
#include "warden/lock.h"
#include "warden/multi_lock.h"
#include "warden/options.h"
#include "warden/semaphore.h"
#include "warden/sequencer.h"
#include "warden/types.h"
#include "warden/version.h"

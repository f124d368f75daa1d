// tests/table/recorded_call.h — one LockTable call as data, so that the property test
// can print a failing sequence and replay it on another table.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>

#include "table/lock_table.h"
#include "table_test_util.h"

namespace warden::table::testing {

inline const char* mode_name(Mode m) { return m == Mode::exclusive ? "X" : "S"; }

inline std::int64_t ms_of(Time t) {
  return std::chrono::duration_cast<milliseconds>(t - at(0)).count();
}

inline std::string time_text(Time t) {
  if (t == Time::max()) return "forever";
  if (t == Time::min()) return "min";
  return std::to_string(ms_of(t));
}

// One call, as made; kept so that a failure can print the sequence and a replay can
// repeat it on another table.
struct Call {
  enum class Op { acquire, cancel, cancel_session, renew, release, advance };
  Call(Op o, Time t) : op(o), now(t) {}

  Op op;
  Time now;
  Request request;            // acquire
  RequestId id = 0;           // cancel
  std::uint64_t session = 0;  // cancel_session
  std::string key;            // renew, release
  std::uint64_t token = 0;    // renew, release
  milliseconds ttl{0};        // renew
};

inline std::string describe(const Call& c) {
  std::ostringstream out;
  out << "@" << time_text(c.now) << " ";
  switch (c.op) {
    case Call::Op::acquire:
      out << "acquire " << c.request.key << " " << mode_name(c.request.mode)
          << (c.request.fair ? " fair" : " non-fair") << " ttl=" << c.request.ttl.count()
          << " delay=" << c.request.lock_delay.count()
          << " deadline=" << time_text(c.request.deadline) << " session=" << c.request.session;
      if (c.request.capacity > 0) {
        out << " permits=" << c.request.permits << "/" << c.request.capacity;
      }
      break;
    case Call::Op::cancel:
      out << "cancel " << c.id;
      break;
    case Call::Op::cancel_session:
      out << "cancel_session " << c.session;
      break;
    case Call::Op::renew:
      out << "renew " << c.key << " token=" << c.token << " ttl=" << c.ttl.count();
      break;
    case Call::Op::release:
      out << "release " << c.key << " token=" << c.token;
      break;
    case Call::Op::advance:
      out << "advance";
      break;
  }
  return out.str();
}

// Applies one call to a table and returns a text of everything observable it caused,
// tokens included: two tables fed the same calls must produce the same texts. Also
// prints a failed sequence (by replaying it), so the checks need not keep a log.
inline std::string apply(LockTable& table, const Call& c) {
  static constexpr const char* kStatus[] = {"granted", "queued", "busy", "mismatch"};
  static constexpr const char* kEvent[] = {"granted", "timed_out", "expired"};
  std::ostringstream out;
  switch (c.op) {
    case Call::Op::acquire: {
      AcquireResult r = table.acquire(c.request, c.now);
      out << kStatus[static_cast<int>(r.status)] << " id=" << r.id;
      if (r.status == AcquireStatus::granted) {
        out << " token=" << r.grant.token << " expires=" << time_text(r.grant.expires);
      }
      break;
    }
    case Call::Op::cancel:
      out << (table.cancel(c.id, c.now) ? "cancelled" : "unknown");
      break;
    case Call::Op::cancel_session:
      out << table.cancel_session(c.session, c.now) << " cancelled";
      break;
    case Call::Op::renew: {
      std::optional<Time> t = table.renew(c.key, c.token, c.ttl, c.now);
      out << (t ? "expires=" + time_text(*t) : "refused");
      break;
    }
    case Call::Op::release:
      out << (table.release(c.key, c.token, c.now) ? "released" : "refused");
      break;
    case Call::Op::advance:
      table.advance(c.now);
      break;
  }
  for (const Event& e : table.take_events()) {
    out << " | " << kEvent[static_cast<int>(e.kind)] << " " << e.grant.key << " id=" << e.grant.id
        << " token=" << e.grant.token << " expires=" << time_text(e.grant.expires);
  }
  return out.str();
}

}  // namespace warden::table::testing

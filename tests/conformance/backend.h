// conformance/backend.h — what the conformance suite needs from an engine under test.
//
// Each engine's test target provides one or more EngineCase values: a name, and a
// function that starts a throwaway backend (a real server on 127.0.0.1 with a temp dir
// and a free port, or the in-process table) and returns a Backend for it. The backend
// is stopped when the Backend is destroyed.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "warden/types.h"

namespace warden::conformance {

class Backend {
 public:
  virtual ~Backend() = default;
  // A URI that Client::open accepts for this backend. Every call may return the same
  // URI; clients opened from it share the backend's lock state.
  virtual std::string uri() const = 0;
  // Makes the backend forget every grant of (group, name) as if its leases had ended,
  // without telling the clients. false if this backend cannot do that (the tests that
  // need it are then skipped).
  virtual bool drop_grants(std::string_view group, std::string_view name) = 0;
};

struct EngineCase {
  std::string name;  // a GoogleTest-safe identifier: [A-Za-z0-9_]
  std::function<std::unique_ptr<Backend>()> start;
};

}  // namespace warden::conformance

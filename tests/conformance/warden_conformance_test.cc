// The conformance suite against warden://, a real wardend started for each test on a
// free loopback port with a data dir of its own.
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "conformance/backend.h"
#include "conformance/conformance_suite.h"
#include "support/server_process.h"
#include "support/wardend_probe.h"

namespace warden::conformance {
namespace {

class WardendBackend final : public Backend {
 public:
  std::string uri() const override { return server_.uri(); }

  // Behind the clients' back, as another holder of the token could: INSPECT the lock,
  // then RELEASE every holder's token.
  bool drop_grants(std::string_view group, std::string_view name) override {
    const testing::WardendProbe probe(server_.port());
    std::string key(group);
    key += '/';
    key += name;
    try {
      for (std::uint64_t token : probe.inspect(key).holder_tokens) probe.release(key, token);
    } catch (const std::runtime_error&) {
      return false;
    }
    return true;
  }

 private:
  testing::Wardend server_;
};

INSTANTIATE_TEST_SUITE_P(Warden, Conformance,
                         ::testing::Values(EngineCase{
                             "Warden", [] { return std::make_unique<WardendBackend>(); }}),
                         name_printer);

}  // namespace
}  // namespace warden::conformance

// The conformance suite against mem://, the in-process lock table.
#include <atomic>
#include <memory>
#include <string>
#include <string_view>

#include "conformance/backend.h"
#include "conformance/conformance_suite.h"
#include "engines/mem/mem_engine.h"

namespace warden::conformance {
namespace {

// Each start gets a table of its own ("mem://conf-<n>"), so no state survives a test.
class MemBackend final : public Backend {
 public:
  MemBackend() : table_("conf-" + std::to_string(next_table_.fetch_add(1))) {}

  std::string uri() const override { return "mem://" + table_; }

  bool drop_grants(std::string_view group, std::string_view name) override {
    std::string key(group);
    key += '/';
    key += name;
    return engines::mem::drop_grants(table_, key);
  }

 private:
  static inline std::atomic<unsigned> next_table_{0};
  std::string table_;
};

INSTANTIATE_TEST_SUITE_P(Mem, Conformance,
                         ::testing::Values(EngineCase{
                             "Mem", [] { return std::make_unique<MemBackend>(); }}),
                         name_printer);

}  // namespace
}  // namespace warden::conformance

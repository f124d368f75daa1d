// The conformance suite against mem://, the in-process lock table.
#include <atomic>
#include <cstddef>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "conformance/backend.h"
#include "conformance/conformance_suite.h"
#include "conformance/multi_lock_suite.h"
#include "conformance/election_suite.h"
#include "conformance/semaphore_suite.h"
#include "engines/mem/mem_engine.h"

namespace warden::conformance {
namespace {

// mem:// is the lock table itself: every capability but durable tokens.
constexpr Capabilities kMem{.shared = true,
                            .fair = true,
                            .non_fair = true,
                            .lock_delay = true,
                            .fencing = true,
                            .durable_tokens = false,
                            .check = true,
                            .semaphore = true,
                            .atomic_multi = true,
                            .election = true};

// Each start gets a table of its own ("mem://conf-<n>"), so no state survives a test.
class MemBackend final : public Backend {
 public:
  MemBackend() : table_("conf-" + std::to_string(next_table_.fetch_add(1))) {}

  std::string uri() const override { return "mem://" + table_; }

  bool drop_grants(std::string_view group, std::string_view name) override {
    std::string key(group);
    key += '/';
    key += name;
    if (!engines::mem::drop_grants(table_, key)) {
      throw std::runtime_error("mem table '" + table_ + "' is not open");
    }
    return true;
  }

  // The table's own queue, read through mem://'s test hook.
  std::optional<std::size_t> queued(std::string_view group, std::string_view name) override {
    std::string key(group);
    key += '/';
    key += name;
    const auto waiting = engines::mem::queued(table_, key);
    if (!waiting) throw std::runtime_error("mem table '" + table_ + "' is not open");
    return waiting;
  }

 private:
  static inline std::atomic<unsigned> next_table_{0};
  std::string table_;
};

const EngineCase kMemCase{"Mem", kMem, [] { return std::make_unique<MemBackend>(); }};

INSTANTIATE_TEST_SUITE_P(Mem, Conformance, ::testing::Values(kMemCase), name_printer);
INSTANTIATE_TEST_SUITE_P(Mem, SemaphoreConformance, ::testing::Values(kMemCase), name_printer);
INSTANTIATE_TEST_SUITE_P(Mem, ElectionConformance, ::testing::Values(kMemCase), name_printer);

INSTANTIATE_TEST_SUITE_P(Mem, MultiLockConformance, ::testing::Values(kMemCase), name_printer);

}  // namespace
}  // namespace warden::conformance

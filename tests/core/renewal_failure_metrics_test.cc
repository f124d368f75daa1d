// A renewal round that fails as a whole is counted in every group it was renewing, not
// only in the group of its first grant.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <string>
#include <thread>

#include "support/server_process.h"
#include "support/waiting.h"
#include "warden/client.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden {
namespace {

using namespace std::chrono_literals;

// The counter's sample line for `group` in the Prometheus text, or 0.
std::uint64_t renewal_failures(const Client& client, const std::string& group) {
  const std::string text = client.metrics_text();
  const std::string prefix = "warden_renewal_failures_total{group=\"" + group + "\"} ";
  const auto at = text.find(prefix);
  if (at == std::string::npos) return 0;
  return std::stoull(text.substr(at + prefix.size()));
}

TEST(RenewalMetrics, AFailedRoundCountsInEveryGroupItRenewed) {
  testing::Wardend server;
  ClientOptions options;
  options.op_timeout = 200ms;
  options.renew_interval = 300ms;
  options.lock_defaults.ttl = 10s;
  Client client = Client::open(server.uri(), options);

  Lease a = client.lock("alpha", "x").acquire(Mode::exclusive, Wait::up_to(5s));
  Lease b = client.lock("beta", "y").acquire(Mode::exclusive, Wait::up_to(5s));
  ASSERT_TRUE(a);
  ASSERT_TRUE(b);

  // A frozen server answers nothing: the next batched round times out as a whole.
  server.process().signal(SIGSTOP);
  const bool both = testing::eventually(
      [&] { return renewal_failures(client, "alpha") > 0 && renewal_failures(client, "beta") > 0; },
      8s);
  server.process().signal(SIGCONT);
  EXPECT_TRUE(both) << client.metrics_text();
  EXPECT_FALSE(a.lost());
  EXPECT_FALSE(b.lost());
}

}  // namespace
}  // namespace warden

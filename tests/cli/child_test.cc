#include "cli/child.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <string>
#include <vector>

namespace warden::cli {
namespace {

TEST(ExitStatus, IsTheExitCodeOrTheSignalPlus128) {
  EXPECT_EQ(exit_status(W_EXITCODE(0, 0)), 0);
  EXPECT_EQ(exit_status(W_EXITCODE(3, 0)), 3);
  EXPECT_EQ(exit_status(W_EXITCODE(255, 0)), 255);
  EXPECT_EQ(exit_status(W_EXITCODE(0, SIGTERM)), 128 + SIGTERM);
  EXPECT_EQ(exit_status(W_EXITCODE(0, SIGKILL)), 128 + SIGKILL);
}

TEST(EnvironmentWith, ReplacesExistingEntriesAndAppendsNewOnes) {
  std::vector<std::string> base = {"PATH=/bin", "WARDEN_TOKEN=stale", "HOME=/root",
                                   "WARDEN_TOKENX=kept"};
  std::vector<std::string> env =
      environment_with(base, {"WARDEN_TOKEN=7", "WARDEN_SEQUENCER=g/n:exclusive:7"});
  EXPECT_EQ(env, (std::vector<std::string>{"PATH=/bin", "HOME=/root", "WARDEN_TOKENX=kept",
                                           "WARDEN_TOKEN=7", "WARDEN_SEQUENCER=g/n:exclusive:7"}));
}

}  // namespace
}  // namespace warden::cli

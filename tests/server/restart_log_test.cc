// The fixture the restart tests stand on (support/server_process.h): a server started
// again appends to the same log, and waiting for its "listening on" must wait for the new
// run's line, not find the one the run before left. Loaded run 25 read the log of a
// restarted wardend before the new run had written anything: the old line had satisfied
// the wait, the new port already accepted connections.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "support/server_process.h"

namespace warden::testing {
namespace {

using namespace std::chrono_literals;

TEST(ServerProcessLog, ARestartWaitsForTheLineOfItsOwnRun) {
  TempDir dir("restart-log");
  const auto log = dir.path() / "server.log";
  ServerProcess first({"/bin/sh", "-c", "echo 'first: listening on'; exec sleep 60"}, log);
  first.start();
  ASSERT_TRUE(first.wait_for_log("listening on", 10s)) << first.log_text();
  first.kill9();

  // The next run says it listens only after a while; the previous run's line is there.
  ServerProcess second({"/bin/sh", "-c", "sleep 2; echo 'second: listening on'; exec sleep 60"},
                       log);
  second.start();
  EXPECT_FALSE(second.wait_for_log("listening on", 500ms))
      << "the previous run's line counted for this run";
  EXPECT_TRUE(second.wait_for_log("second: listening on", 20s)) << second.log_text();
  EXPECT_NE(second.log_text().find("first: listening on"), std::string::npos)
      << "log_text() is the whole log";
  second.kill9();
}

// A file whose read fails reads as nothing; it does not throw. A directory stands in for
// /proc/PID/stat of a process that ended between the open and the read (ESRCH): both
// open, and their read(2) fails. Loaded, a fixture's destructor met the latter, and the
// exception that libstdc++'s filebuf threw ended the test process.
TEST(ProcFiles, AFileWhoseReadFailsReadsAsNothing) {
  TempDir dir("proc-files");
  std::string text = "unchanged";
  EXPECT_NO_THROW(text = read_proc_file(dir.path()));
  EXPECT_EQ(text, "");
  EXPECT_EQ(read_proc_file(dir.path() / "absent"), "");
  EXPECT_NE(read_proc_file("/proc/self/stat").find(')'), std::string::npos);
}

}  // namespace
}  // namespace warden::testing

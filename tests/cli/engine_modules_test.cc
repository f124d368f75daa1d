// End-to-end tests of the `warden` command's engine modules (cli/engine_modules.h): the
// command links only the core and finds every other engine as a module at
// WARDEN_MODULES_FROM_BIN, relative to itself. These tests copy the built command into
// a directory of their own, with no modules or with a wrong one beside it.

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "process.h"
#include "support/server_process.h"

namespace warden::cli::testing {
namespace {

using namespace std::chrono_literals;
using Args = std::vector<std::string>;
using warden::testing::TempDir;
namespace fs = std::filesystem;

// The built command, copied to <dir>/bin/warden; modules go to module_dir().
class CopiedCommand {
 public:
  CopiedCommand() {
    fs::create_directories(dir_.path() / "bin");
    fs::copy_file(WARDEN_CLI_PATH, command());
  }
  fs::path command() const { return dir_.path() / "bin" / "warden"; }
  fs::path module_dir() const {
    return (dir_.path() / "bin" / WARDEN_MODULES_FROM_BIN).lexically_normal();
  }
  Outcome run_on(const std::string& url) const {
    return run({command().string(), "run", "--url", url, "--group", "g", "--name", "n", "--wait",
                "2s", "--", "true"},
               environment({"WARDEN_URL", "WARDEN_TOKEN", "WARDEN_SEQUENCER"}), 60s);
  }

 private:
  TempDir dir_;
};

TEST(WardenEngineModules, WithoutModulesTheCoreWorksAndOtherEnginesNameTheirPackage) {
  const CopiedCommand warden;
  const Outcome mem = warden.run_on("mem://");
  EXPECT_EQ(mem.status, 0) << mem.err;

  for (const auto& [url, package] : std::vector<std::pair<std::string, std::string>>{
           {"etcd://127.0.0.1:1", "libwarden-etcd0"},
           {"rediss://127.0.0.1:1", "libwarden-redis0"},
           {"zk://127.0.0.1:1", "libwarden-zookeeper0"},
           {"postgres://warden@127.0.0.1:1/warden", "libwarden-postgres0"},
           {"mysql://warden@127.0.0.1:1/warden", "libwarden-mysql0"}}) {
    const Outcome o = warden.run_on(url);
    EXPECT_EQ(o.status, 64) << url << ": " << o.err;
    EXPECT_TRUE(contains(o.err, "unsupported: ")) << url << ": " << o.err;
    EXPECT_TRUE(contains(o.err, "found no module " + warden.module_dir().string()))
        << url << ": " << o.err;
    EXPECT_TRUE(contains(o.err, "(install " + package + ")")) << url << ": " << o.err;
  }
}

TEST(WardenEngineModules, AModuleOfAnotherVersionIsNotUsed) {
  const CopiedCommand warden;
  fs::create_directories(warden.module_dir());
  fs::copy_file(WARDEN_OTHER_VERSION_MODULE, warden.module_dir() / "etcd.so");

  const Outcome o = warden.run_on("etcd://127.0.0.1:1");
  EXPECT_EQ(o.status, 64) << o.err;
  EXPECT_TRUE(contains(o.err, "etcd.so is from warden 0.0.0-other, this command is warden "))
      << o.err;
  EXPECT_TRUE(contains(o.err, "install libwarden-etcd0 of the same version")) << o.err;
}

TEST(WardenEngineModules, AModuleIsLoadedOnlyWhenAUriNeedsItsEngine) {
  const CopiedCommand warden;
  fs::create_directories(warden.module_dir());
  fs::copy_file(WARDEN_OTHER_VERSION_MODULE, warden.module_dir() / "etcd.so");
  const TempDir marks("warden-module-loads");
  const fs::path loads = marks.path() / "loads";
  const auto run_on = [&](const std::string& url) {
    return run({warden.command().string(), "run", "--url", url, "--group", "g", "--name", "n",
                "--wait", "2s", "--", "true"},
               environment({"WARDEN_URL", "WARDEN_TOKEN", "WARDEN_SEQUENCER"},
                           {"WARDEN_TEST_MODULE_LOADED=" + loads.string()}),
               60s);
  };

  const Outcome mem = run_on("mem://");
  EXPECT_EQ(mem.status, 0) << mem.err;
  EXPECT_FALSE(fs::exists(loads)) << "a command on mem:// loaded the etcd module";
  const Outcome version =
      run({warden.command().string(), "--version"},
          environment({}, {"WARDEN_TEST_MODULE_LOADED=" + loads.string()}), 60s);
  EXPECT_EQ(version.status, 0) << version.err;
  EXPECT_FALSE(fs::exists(loads)) << "warden --version loaded the etcd module";

  const Outcome etcd = run_on("etcd://127.0.0.1:1");
  EXPECT_EQ(etcd.status, 64) << etcd.err;
  EXPECT_TRUE(fs::exists(loads)) << "the etcd module was not loaded for etcd://";
  EXPECT_TRUE(contains(etcd.err, "etcd.so is from warden 0.0.0-other")) << etcd.err;
}

TEST(WardenEngineModules, AFileThatIsNoModuleIsNotUsed) {
  const CopiedCommand warden;
  fs::create_directories(warden.module_dir());
  {
    std::ofstream junk(warden.module_dir() / "zookeeper.so");
    junk << "not a shared object\n";
  }
  const Outcome o = warden.run_on("zk://127.0.0.1:1");
  EXPECT_EQ(o.status, 64) << o.err;
  EXPECT_TRUE(contains(o.err, "could not load " + (warden.module_dir() / "zookeeper.so").string()))
      << o.err;
  EXPECT_TRUE(contains(o.err, "(reinstall libwarden-zookeeper0)")) << o.err;
}

}  // namespace
}  // namespace warden::cli::testing

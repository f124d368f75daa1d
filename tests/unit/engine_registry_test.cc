// The composition root's map from URI schemes to engine components
// (compose/engine_registry.h): a scheme whose component the program lacks fails with
// Errc::unsupported naming what to install, never "unknown scheme". This test program
// links every component, so absence is made by withdrawing one and restored after.

#include "compose/engine_registry.h"

#include <gtest/gtest.h>

#include <string>

#include "engines/mysql/mysql_engine.h"
#include "warden/client.h"
#include "warden/error.h"

namespace warden::compose {
namespace {

// Withdraws the mysql component for the life of the object; registers it again after.
class WithoutMysql {
 public:
  WithoutMysql() { withdraw_component("mysql"); }
  ~WithoutMysql() {
    note_absent_component("mysql", "");
    register_component("mysql", &engines::mysql::open);
  }
  WithoutMysql(const WithoutMysql&) = delete;
  WithoutMysql& operator=(const WithoutMysql&) = delete;
};

Error open_error(const std::string& uri) {
  try {
    Client::open(uri);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << uri << " opened";
  return Error(Errc::internal, "opened");
}

TEST(EngineRegistry, EverySchemeBelongsToOneComponent) {
  EXPECT_EQ(component_of("mem"), "core");
  EXPECT_EQ(component_of("wardens"), "core");
  EXPECT_EQ(component_of("rediss"), "redis");
  EXPECT_EQ(component_of("redis+cluster"), "redis");
  EXPECT_EQ(component_of("redlock"), "redis");
  EXPECT_EQ(component_of("etcds"), "etcd");
  EXPECT_EQ(component_of("zk"), "zookeeper");
  EXPECT_EQ(component_of("postgresql"), "postgres");
  EXPECT_EQ(component_of("mysql"), "mysql");
  EXPECT_EQ(component_of("nosuch"), "");
  for (const std::string_view component : engine_components()) {
    EXPECT_TRUE(has_component(component)) << component << " is linked into this program";
  }
}

TEST(EngineRegistry, AnUnknownSchemeIsInvalidAndListsTheKnownOnes) {
  const Error e = open_error("nosuch://127.0.0.1:1");
  EXPECT_EQ(e.code(), Errc::invalid_argument);
  EXPECT_NE(std::string(e.what()).find("unknown URI scheme 'nosuch'"), std::string::npos)
      << e.what();
  EXPECT_NE(std::string(e.what()).find("redis+sentinel"), std::string::npos) << e.what();
}

TEST(EngineRegistry, AnAbsentComponentIsUnsupportedAndNamesWhatBringsIt) {
  const WithoutMysql absent;
  EXPECT_FALSE(has_component("mysql"));
  const Error e = open_error("mysql://warden@127.0.0.1:1/warden");
  EXPECT_EQ(e.code(), Errc::unsupported);
  const std::string text = e.what();
  EXPECT_NE(text.find("mysql:// is served by warden's mysql engine"), std::string::npos) << text;
  EXPECT_NE(text.find("libwarden-mysql0"), std::string::npos) << text;
  EXPECT_NE(text.find("warden::mysql"), std::string::npos) << text;
  // This build has every engine: the message does not blame the build.
  EXPECT_EQ(text.find("built without it"), std::string::npos) << text;

  note_absent_component("mysql", "the module was from another version");
  const std::string noted = open_error("mysql://warden@127.0.0.1:1/warden").what();
  EXPECT_NE(noted.find("; the module was from another version"), std::string::npos) << noted;
  EXPECT_EQ("unsupported: " + describe_absent("mysql"), noted) << "what() leads with the code";
}

TEST(EngineRegistry, AComponentRegisteredAgainServesItsSchemes) {
  { const WithoutMysql absent; }
  ASSERT_TRUE(has_component("mysql"));
  // Nothing listens on port 1: the engine is there and fails to connect.
  ClientOptions options;
  options.op_timeout = std::chrono::seconds(5);
  try {
    Client::open("mysql://warden@127.0.0.1:1/warden", options);
    FAIL() << "connected to port 1";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::unavailable) << e.what();
  }
}

}  // namespace
}  // namespace warden::compose

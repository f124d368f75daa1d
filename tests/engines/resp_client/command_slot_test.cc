// engines/resp_client/cluster_router.h's command_slot: which key a command is routed by.
#include <gtest/gtest.h>

#include "engines/resp_client/cluster_router.h"
#include "engines/resp_client/cluster_slots.h"
#include "warden/error.h"

namespace warden::engines::resp_client {
namespace {

TEST(CommandSlot, AScriptCallGoesByItsFirstKeyAndAnyOtherCommandByItsFirstArgument) {
  EXPECT_EQ(command_slot({"EVALSHA", "abc", "2", "{a}:h", "{b}:i", "arg"}), key_slot("{a}"));
  EXPECT_EQ(command_slot({"eval", "return 1", "1", "k"}), key_slot("k"));
  EXPECT_EQ(command_slot({"EXISTS", "{warden:g/x}:i"}), key_slot("warden:g/x"));
}

TEST(CommandSlot, ACommandWithoutAKeyCannotBeRouted) {
  for (const Command& keyless :
       {Command{"WAIT", "1", "100"}, Command{"MULTI"}, Command{"EVALSHA", "abc", "0"},
        Command{"EVAL", "return 1", "x", "k"}, Command{"PING"}, Command{}}) {
    try {
      command_slot(keyless);
      ADD_FAILURE() << (keyless.empty() ? "(empty)" : keyless[0]) << " was routed";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::internal);
    }
  }
}

}  // namespace
}  // namespace warden::engines::resp_client

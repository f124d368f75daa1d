#include "warden/sequencer.h"

#include <gtest/gtest.h>

#include "warden/error.h"

namespace warden {
namespace {

TEST(Sequencer, FormatsAsGroupNameModeToken) {
  EXPECT_EQ((Sequencer{"billing", "invoice-7", Mode::shared, 42}).str(),
            "billing/invoice-7:shared:42");
}

TEST(Sequencer, NamesMayHoldSlashesAndColons) {
  const Sequencer s{"g", "a/b:c:d", Mode::exclusive, 18446744073709551615u};
  EXPECT_EQ(Sequencer::parse(s.str()), s);
}

TEST(Sequencer, AHoldFromTheCacheCarriesItsReuse) {
  const Sequencer first{"g", "n", Mode::exclusive, 42, 0};
  const Sequencer third{"g", "n", Mode::exclusive, 42, 2};
  EXPECT_EQ(first.str(), "g/n:exclusive:42") << "a grant's own hold reads as before";
  EXPECT_EQ(third.str(), "g/n:exclusive:42+2");
  EXPECT_EQ(Sequencer::parse(third.str()), third);
  EXPECT_EQ(Sequencer::parse("g/a+b:shared:1+3").name, "a+b");
}

TEST(Sequencer, RejectsMalformedText) {
  for (const char* text : {"", "g", "g/n", "g/n:1", "g/n:x:1", "g/n:exclusive:abc",
                           "g/n:exclusive:", "g/n:exclusive:-1", "g/n:exclusive:1x",
                           "g/n:exclusive:99999999999999999999", "/n:exclusive:1", "g/:exclusive:1",
                           "bad group/n:shared:1", "g:shared:1", "g/n:shared:1+", "g/n:shared:+1",
                           "g/n:shared:1+x", "g/n:shared:1+2+3", "g/n:shared:1+-2"}) {
    try {
      Sequencer::parse(text);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << text;
    }
  }
}

}  // namespace
}  // namespace warden

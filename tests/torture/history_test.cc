// History files: every kind survives a write and a read, each line carries only the
// fields of its kind, and a bad line is reported by its number.

#include "torture/history.h"

#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "events.h"

namespace warden::torture {
namespace {

using namespace testing;  // the event helpers of events.h

std::vector<Event> one_of_each_kind() {
  Event write_rejected = write(2, 8, 12, 13.5, false);
  return {
      request(0, 1),
      grant(0, 2, 18'446'744'073'709'551'615u),  // tokens use all 64 bits
      timeout(1, 3),
      error(1, 4, "connection refused: \"127.0.0.1\"\n"),
      lost(0, 5, 7),
      release(0, 6, 7),
      write(0, 7, 7, 9.25, true),
      write_rejected,
      fault("pause-holder", "client 0", 0, 10, 20),
      fault("kill-server", "server 127.0.0.1:7001", -1, 11, 12),  // no client
      death(3, 21),
  };
}

std::string written(const std::vector<Event>& events) {
  std::ostringstream out;
  for (const Event& e : events) write_event(out, e);
  return out.str();
}

std::vector<Event> read(const std::string& text) {
  std::istringstream in(text);
  return read_history(in);
}

// The message read_history throws for `text`, or "" if it throws nothing.
std::string read_error(const std::string& text) {
  try {
    read(text);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(History, KindNamesRoundTrip) {
  for (const Event& e : one_of_each_kind()) {
    EXPECT_EQ(event_kind_from(to_string(e.kind)), e.kind) << to_string(e.kind);
  }
  EXPECT_EQ(event_kind_from("grants"), std::nullopt);
  EXPECT_EQ(event_kind_from(""), std::nullopt);
}

TEST(History, EveryKindRoundTrips) {
  const std::vector<Event> events = one_of_each_kind();
  EXPECT_EQ(read(written(events)), events);
}

TEST(History, OneObjectPerLineWithOnlyTheFieldsOfItsKind) {
  const std::string text = written({request(0, 1), write(0, 7, 7, 9, true)});
  EXPECT_EQ(text,
            "{\"kind\":\"request\",\"time\":1000000,\"client\":0}\n"
            "{\"kind\":\"write\",\"time\":7000000,\"client\":0,\"token\":7,\"start\":7000000,"
            "\"end\":9000000,\"accepted\":true}\n");
  // A server fault has no client at all.
  const std::string server = written({fault("kill-server", "server a", -1, 1, 2)});
  EXPECT_EQ(server.find("client"), std::string::npos) << server;
}

TEST(History, DetailThatIsNotUtf8IsWrittenNotThrown) {
  const std::vector<Event> events = {error(0, 1, "bad \xff byte")};
  std::string text;
  ASSERT_NO_THROW(text = written(events));
  const std::vector<Event> back = read(text);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].detail, "bad \xEF\xBF\xBD byte");  // U+FFFD
}

TEST(History, BlankLinesAreIgnored) {
  const std::string text = "\n" + written({request(0, 1)}) + "  \n\n" + written({timeout(0, 2)});
  const std::vector<Event> events = read(text);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].kind, EventKind::timeout);
}

TEST(History, MalformedLineIsNamedByItsNumber) {
  const std::string good = written({request(0, 1)});
  // Line 3 (the blank line 2 still counts): JSON cut short.
  std::string message = read_error(good + "\n{\"kind\":\"grant\",\"time\":");
  EXPECT_EQ(message.rfind("history line 3: ", 0), 0u) << message;

  message = read_error(good + "{\"kind\":\"grab\",\"time\":1,\"client\":0}\n");
  EXPECT_EQ(message.rfind("history line 2: unknown kind \"grab\"", 0), 0u) << message;

  message = read_error(good + good + "{\"kind\":\"grant\",\"time\":1,\"client\":0}\n");
  EXPECT_EQ(message, "history line 3: missing field \"token\"");

  message = read_error("{\"kind\":\"grant\",\"time\":1,\"client\":0,\"token\":-4}\n");
  EXPECT_EQ(message, "history line 1: field \"token\" must be a non-negative integer");

  message = read_error("[1, 2]\n");
  EXPECT_EQ(message, "history line 1: not a JSON object");
}

// Found by fuzz/history_fuzz.cc: values the reader used to accept but could not give
// back — a fault's negative client was left out when written (so it read back as -1),
// and integers beyond 64-bit or int range came back wrapped.
TEST(History, ValuesThatWouldNotReadBackAreRejected) {
  std::string message = read_error(
      "{\"kind\":\"fault\",\"time\":1,\"client\":-5,\"start\":1,\"end\":2,"
      "\"nemesis\":\"n\",\"target\":\"t\"}\n");
  EXPECT_EQ(message, "history line 1: field \"client\" must be a client number (0..2147483647)");

  message = read_error("{\"kind\":\"request\",\"time\":1,\"client\":4294967296}\n");
  EXPECT_EQ(message, "history line 1: field \"client\" must be a client number (0..2147483647)");

  message = read_error("{\"kind\":\"death\",\"time\":18446744073709551615,\"client\":0}\n");
  EXPECT_EQ(message, "history line 1: field \"time\" must be a 64-bit integer");

  // The extremes that do fit still round-trip.
  Event extreme = request(0, 1);
  extreme.client = 2'147'483'647;
  extreme.time = -9'223'372'036'854'775'807 - 1;
  EXPECT_EQ(read(written({extreme})), std::vector<Event>{extreme});
}

TEST(History, SortedByTimeKeepsEqualTimesInOrder) {
  const std::vector<Event> events = {grant(1, 5, 2), release(0, 5, 1), request(2, 1),
                                     lost(0, 5, 1)};
  const std::vector<Event> sorted = sorted_by_time(events);
  ASSERT_EQ(sorted.size(), 4u);
  EXPECT_EQ(sorted[0], events[2]);
  EXPECT_EQ(sorted[1], events[0]);
  EXPECT_EQ(sorted[2], events[1]);
  EXPECT_EQ(sorted[3], events[3]);
}

}  // namespace
}  // namespace warden::torture

// The SVG timeline: well-formed, self-contained, one lane per client, and every text
// from the history escaped.

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "events.h"
#include "torture/timeline_svg.h"

namespace warden::torture {
namespace {

using namespace testing;  // the event helpers of events.h

// Checks that tags nest and every '&' starts an entity: enough of XML's well-formedness
// to catch an unescaped text or a missing end tag. Returns "" or what is wrong.
std::string xml_problem(const std::string& xml) {
  std::vector<std::string> open;
  std::size_t i = 0;
  while (i < xml.size()) {
    if (xml[i] == '&') {
      const std::size_t semicolon = xml.find(';', i);
      if (semicolon == std::string::npos) return "bare & at " + std::to_string(i);
      const std::string entity = xml.substr(i, semicolon - i + 1);
      if (entity != "&amp;" && entity != "&lt;" && entity != "&gt;" && entity != "&quot;" &&
          entity != "&apos;") {
        return "unknown entity " + entity;
      }
      i = semicolon + 1;
      continue;
    }
    if (xml[i] == '>') return "bare > at " + std::to_string(i);
    if (xml[i] != '<') {
      ++i;
      continue;
    }
    const std::size_t close = xml.find('>', i);
    if (close == std::string::npos) return "unterminated tag at " + std::to_string(i);
    std::string tag = xml.substr(i + 1, close - i - 1);
    if (tag.find('<') != std::string::npos) return "< inside tag " + tag;
    i = close + 1;
    if (tag.empty()) return "empty tag";
    if (tag.back() == '/') continue;  // self-closing
    const bool closing = tag.front() == '/';
    std::string name =
        tag.substr(closing ? 1 : 0, tag.find_first_of(" \n/", 1) - (closing ? 1 : 0));
    if (!closing) {
      open.push_back(name);
    } else if (open.empty() || open.back() != name) {
      return "</" + name + "> closes " + (open.empty() ? "nothing" : "<" + open.back() + ">");
    } else {
      open.pop_back();
    }
  }
  if (!open.empty()) return "<" + open.back() + "> never closed";
  return "";
}

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

TimelineOptions with(std::string title, int clients) {
  TimelineOptions options;
  options.title = std::move(title);
  options.clients = clients;
  return options;
}

std::vector<Event> run() {
  return {
      grant(0, 1000, 41),
      write(0, 41, 1100, 1900, true),
      fault("pause-holder", "client 0", 0, 1200, 2500),
      fault("kill-server", "server <a&b>", -1, 2600, 2700),
      grant(1, 2200, 42),
      write(1, 42, 2300, 2400, true),
      lost(0, 2450, 41),
      write(0, 41, 2500, 2510, false),
      death(1, 2800),
  };
}

TEST(Timeline, IsOneWellFormedSelfContainedSvg) {
  const std::string svg = timeline_svg(run(), with("warden torture --clients 3", 3));
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(svg.substr(svg.find_last_not_of(" \n") - 5, 6), "</svg>");
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(svg.find("<script"), std::string::npos);
  EXPECT_EQ(svg.find("href"), std::string::npos);
}

TEST(Timeline, HasOneLaneLabelPerClientEvenWithoutEvents) {
  const std::string svg = timeline_svg(run(), with("", 3));
  EXPECT_EQ(count(svg, ">client 0</text>"), 1u);
  EXPECT_EQ(count(svg, ">client 1</text>"), 1u);
  EXPECT_EQ(count(svg, ">client 2</text>"), 1u);  // no events, still a lane
  EXPECT_EQ(count(svg, ">client 3</text>"), 0u);
}

TEST(Timeline, EscapesTextFromTheHistory) {
  const std::string svg = timeline_svg(run(), with("a < b", 2));
  EXPECT_NE(svg.find("server &lt;a&amp;b&gt;"), std::string::npos);
  EXPECT_EQ(svg.find("<a&b>"), std::string::npos);
  EXPECT_NE(svg.find("a &lt; b"), std::string::npos);
}

TEST(Timeline, HoldBarsCarryTheirGrantInTheirTitle) {
  const std::string svg = timeline_svg(run(), with("", 2));
  // Client 0's hold runs from its first write to its last, 100 to 1510 ms after the
  // first event, and had one write rejected.
  EXPECT_NE(svg.find("<title>client 0, token 41, 100.0 to 1510.0 ms, writes: 1 accepted, "
                     "1 rejected</title>"),
            std::string::npos)
      << svg;
  EXPECT_NE(svg.find("<title>client 1, token 42, "), std::string::npos);
  EXPECT_NE(svg.find("pause-holder"), std::string::npos);
  EXPECT_NE(svg.find("rejected write: client 0, token 41"), std::string::npos);
  EXPECT_NE(svg.find("client 1 died at"), std::string::npos);
  EXPECT_NE(svg.find("client 0 told it lost token 41"), std::string::npos);
}

TEST(Timeline, EmptyHistoryStillDrawsTheLanes) {
  const std::string svg = timeline_svg({}, with("", 1));
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(count(svg, ">client 0</text>"), 1u);
}

}  // namespace
}  // namespace warden::torture

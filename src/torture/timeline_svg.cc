#include "torture/timeline_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <string_view>
#include <utility>

namespace warden::torture {
namespace {

// Layout, in pixels.
constexpr int kLeft = 90;  // lane labels
constexpr int kRight = 20;
constexpr int kTitleHeight = 28;
constexpr int kLaneHeight = 30;
constexpr int kBarHeight = 16;
constexpr int kAxisHeight = 30;
constexpr int kLegendHeight = 22;
constexpr int kMinWidth = kLeft + kRight + 200;
constexpr int kMinTickSpacing = 90;  // between tick labels

constexpr const char* kAccepted = "#43a047";
constexpr const char* kRejected = "#e53935";
constexpr const char* kRejectMark = "#7f0000";
constexpr const char* kFault = "#ff9800";
constexpr const char* kLost = "#6a1b9a";

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

// The smallest 1, 2 or 5 times a power of ten that is at least `raw` (seconds).
double nice_step(double raw) {
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * power >= raw * (1 - 1e-9)) return m * power;
  }
  return 10.0 * power;
}

// A grant (client, token) as the resource saw it.
struct Bar {
  Nanos from = 0;
  Nanos to = 0;
  long accepted = 0;
  long rejected = 0;
};

// Maps history times to the page: times are shown relative to the first event.
class Scale {
 public:
  Scale(Nanos first, Nanos last, int plot_width)
      : first_(first), span_(std::max<Nanos>(last - first, 1)), width_(plot_width) {}

  double x(Nanos t) const {
    return kLeft + static_cast<double>(t - first_) / static_cast<double>(span_) * width_;
  }
  double seconds() const { return static_cast<double>(span_) / 1e9; }
  // Milliseconds since the first event, for hover text.
  std::string ms(Nanos t) const { return fixed(static_cast<double>(t - first_) / 1e6, 1); }

 private:
  Nanos first_;
  Nanos span_;
  int width_;
};

class Svg {
 public:
  void add(std::string_view text) { out_ += text; }
  std::string px(double v) const { return fixed(v, 1); }

  void rect(double x, double y, double w, double h, std::string_view attributes,
            std::string_view title = {}) {
    out_ += "<rect x=\"" + px(x) + "\" y=\"" + px(y) + "\" width=\"" + px(w) + "\" height=\"" +
            px(h) + "\"";
    attribute_list(attributes);
    close("rect", title);
  }

  void line(double x1, double y1, double x2, double y2, std::string_view attributes,
            std::string_view title = {}) {
    out_ += "<line x1=\"" + px(x1) + "\" y1=\"" + px(y1) + "\" x2=\"" + px(x2) + "\" y2=\"" +
            px(y2) + "\"";
    attribute_list(attributes);
    close("line", title);
  }

  void text(double x, double y, std::string_view attributes, std::string_view content) {
    out_ += "<text x=\"" + px(x) + "\" y=\"" + px(y) + "\"";
    attribute_list(attributes);
    out_ += ">" + escape(content) + "</text>\n";
  }

  std::string take() { return std::move(out_); }

 private:
  void attribute_list(std::string_view attributes) {
    if (attributes.empty()) return;
    out_ += ' ';
    out_ += attributes;
  }

  // Ends an element, with a <title> child (the browser's hover text) if there is one.
  void close(std::string_view name, std::string_view title) {
    if (title.empty()) {
      out_ += "/>\n";
      return;
    }
    out_ += "><title>" + escape(title) + "</title></";
    out_ += name;
    out_ += ">\n";
  }

  std::string out_;
};

}  // namespace

std::string timeline_svg(const std::vector<Event>& history, const TimelineOptions& options) {
  int lanes = std::max(options.clients, 0);
  Nanos first = std::numeric_limits<Nanos>::max();
  Nanos last = std::numeric_limits<Nanos>::min();
  for (const Event& e : history) {
    lanes = std::max(lanes, e.client + 1);
    first = std::min(first, e.time);
    last = std::max(last, e.time);
    if (e.kind == EventKind::write || e.kind == EventKind::fault) {
      first = std::min(first, e.start);
      last = std::max({last, e.start, e.end});
    }
  }
  if (history.empty()) first = last = 0;

  const int width = std::max(options.width_px, kMinWidth);
  const int plot_width = width - kLeft - kRight;
  const int lanes_top = kTitleHeight;
  const int lanes_bottom = lanes_top + lanes * kLaneHeight;
  const int height = lanes_bottom + kAxisHeight + kLegendHeight;
  const Scale scale(first, last, plot_width);
  auto lane_top = [&](int client) { return static_cast<double>(lanes_top + client * kLaneHeight); };
  // Something that happened at one instant still gets a visible width.
  auto span_width = [&](Nanos from, Nanos to) {
    return std::max(scale.x(std::max(from, to)) - scale.x(from), 2.0);
  };

  Svg svg;
  const std::string w = std::to_string(width);
  const std::string h = std::to_string(height);
  svg.add("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + w + "\" height=\"" + h +
          "\" viewBox=\"0 0 " + w + " " + h + "\" font-family=\"sans-serif\" font-size=\"11\">\n");
  svg.add("<title>" + escape(options.title.empty() ? "warden torture" : options.title) +
          "</title>\n");
  svg.rect(0, 0, width, height, "fill=\"white\"");
  svg.text(kLeft, 18, "font-size=\"13\" font-weight=\"bold\"", options.title);

  // Lanes, then the time grid over them.
  for (int c = 0; c < lanes; ++c) {
    svg.rect(kLeft, lane_top(c), plot_width, kLaneHeight,
             c % 2 == 0 ? "fill=\"#f5f5f5\"" : "fill=\"#ebebeb\"");
    svg.text(kLeft - 8, lane_top(c) + kLaneHeight / 2.0 + 4, "text-anchor=\"end\"",
             "client " + std::to_string(c));
  }
  const double step =
      nice_step(scale.seconds() / std::max(1.0, static_cast<double>(plot_width) / kMinTickSpacing));
  const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  svg.line(kLeft, lanes_bottom, kLeft + plot_width, lanes_bottom, "stroke=\"#444\"");
  for (long k = 0; k * step <= scale.seconds() * (1 + 1e-9); ++k) {
    const double seconds = static_cast<double>(k) * step;
    const double x = scale.x(first + std::llround(seconds * 1e9));
    svg.line(x, lanes_top, x, lanes_bottom, "stroke=\"#d0d0d0\"");
    svg.line(x, lanes_bottom, x, lanes_bottom + 5, "stroke=\"#444\"");
    svg.text(x, lanes_bottom + 17, "text-anchor=\"middle\"", fixed(seconds, decimals) + " s");
  }

  // Faults under the holds: over the client's lane, or across all lanes for a server.
  for (const Event& e : history) {
    if (e.kind != EventKind::fault) continue;
    const bool on_client = e.client >= 0;
    const double top = on_client ? lane_top(e.client) : lanes_top;
    const double band_height = on_client ? kLaneHeight : lanes_bottom - lanes_top;
    const std::string title = e.nemesis + " on " + e.target + ", " + scale.ms(e.start) + " to " +
                              scale.ms(std::max(e.start, e.end)) + " ms";
    svg.rect(scale.x(e.start), top, span_width(e.start, e.end), band_height,
             std::string("fill=\"") + kFault + "\" fill-opacity=\"0.25\"", title);
    svg.text(scale.x(e.start) + 2, top + 9, "font-size=\"8\" fill=\"#a04000\"", e.nemesis);
  }

  // Holds as the resource saw them, by grant (client, token).
  std::map<std::pair<int, std::uint64_t>, Bar> bars;
  for (const Event& e : history) {
    if (e.kind != EventKind::write || e.client < 0) continue;
    auto [it, inserted] = bars.try_emplace({e.client, e.token}, Bar{e.start, e.end, 0, 0});
    Bar& bar = it->second;
    bar.from = std::min(bar.from, e.start);
    bar.to = std::max(bar.to, e.end);
    ++(e.accepted ? bar.accepted : bar.rejected);
  }
  const double bar_offset = (kLaneHeight - kBarHeight) / 2.0;
  for (const auto& [grant, bar] : bars) {
    const auto [client, token] = grant;
    const double x = scale.x(bar.from);
    const double bar_width = span_width(bar.from, bar.to);
    const std::string title = "client " + std::to_string(client) + ", token " +
                              std::to_string(token) + ", " + scale.ms(bar.from) + " to " +
                              scale.ms(bar.to) + " ms, writes: " + std::to_string(bar.accepted) +
                              " accepted, " + std::to_string(bar.rejected) + " rejected";
    svg.rect(x, lane_top(client) + bar_offset, bar_width, kBarHeight,
             std::string("fill=\"") + (bar.rejected > 0 ? kRejected : kAccepted) + "\"", title);
    const std::string label = std::to_string(token);
    // About 6 px per digit at font-size 10, and a little air on either side.
    if (bar_width >= static_cast<double>(label.size()) * 6.0 + 6.0) {
      svg.text(x + bar_width / 2, lane_top(client) + bar_offset + 12,
               "text-anchor=\"middle\" font-size=\"10\" fill=\"white\"", label);
    }
  }

  // Point events over the bars.
  for (const Event& e : history) {
    if (e.client < 0 || e.client >= lanes) continue;
    const double top = lane_top(e.client);
    if (e.kind == EventKind::write && !e.accepted) {
      svg.line(scale.x(e.start), top + 3, scale.x(e.start), top + kLaneHeight - 3,
               std::string("stroke=\"") + kRejectMark + "\" stroke-width=\"1.5\"",
               "rejected write: client " + std::to_string(e.client) + ", token " +
                   std::to_string(e.token) + ", at " + scale.ms(e.start) + " ms");
    } else if (e.kind == EventKind::lost) {
      const double x = scale.x(e.time);
      svg.add("<polygon points=\"" + svg.px(x - 4) + "," + svg.px(top + 1) + " " + svg.px(x + 4) +
              "," + svg.px(top + 1) + " " + svg.px(x) + "," + svg.px(top + 7) + "\" fill=\"" +
              kLost + "\"><title>" +
              escape("client " + std::to_string(e.client) + " told it lost token " +
                     std::to_string(e.token) + " at " + scale.ms(e.time) + " ms") +
              "</title></polygon>\n");
    } else if (e.kind == EventKind::death) {
      const double x = scale.x(e.time);
      const double y = top + kLaneHeight / 2.0;
      svg.add(
          "<g stroke=\"black\" stroke-width=\"2\"><title>" +
          escape("client " + std::to_string(e.client) + " died at " + scale.ms(e.time) + " ms") +
          "</title>\n");
      svg.line(x - 5, y - 5, x + 5, y + 5, "");
      svg.line(x - 5, y + 5, x + 5, y - 5, "");
      svg.add("</g>\n");
    }
  }

  // Legend.
  const double legend_y = lanes_bottom + kAxisHeight;
  double lx = kLeft;
  auto legend_text = [&](std::string_view text) {
    svg.text(lx, legend_y + 10, "", text);
    lx += static_cast<double>(text.size()) * 6.0 + 20;
  };
  svg.rect(lx, legend_y, 14, 12, std::string("fill=\"") + kAccepted + "\"");
  lx += 18;
  legend_text("hold, all writes accepted");
  svg.rect(lx, legend_y, 14, 12, std::string("fill=\"") + kRejected + "\"");
  lx += 18;
  legend_text("hold with a rejected write (marked)");
  svg.rect(lx, legend_y, 14, 12, std::string("fill=\"") + kFault + "\" fill-opacity=\"0.25\"");
  lx += 18;
  legend_text("fault");
  svg.add("<polygon points=\"" + svg.px(lx) + "," + svg.px(legend_y + 2) + " " + svg.px(lx + 8) +
          "," + svg.px(legend_y + 2) + " " + svg.px(lx + 4) + "," + svg.px(legend_y + 8) +
          "\" fill=\"" + kLost + "\"/>\n");
  lx += 12;
  legend_text("lost");
  svg.add("<g stroke=\"black\" stroke-width=\"2\">\n");
  svg.line(lx, legend_y + 1, lx + 10, legend_y + 11, "");
  svg.line(lx, legend_y + 11, lx + 10, legend_y + 1, "");
  svg.add("</g>\n");
  lx += 14;
  legend_text("death");

  svg.add("</svg>\n");
  return svg.take();
}

}  // namespace warden::torture

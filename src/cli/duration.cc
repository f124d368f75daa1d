#include "cli/duration.h"

#include <array>
#include <cstdint>
#include <limits>

namespace warden::cli {
namespace {

struct Unit {
  std::string_view name;
  std::uint64_t nanos;
};

// Longest names first, so "ms" is not read as "m" followed by garbage.
constexpr std::array<Unit, 6> kUnits = {{
    {"ns", 1},
    {"us", 1'000},
    {"ms", 1'000'000},
    {"s", 1'000'000'000},
    {"m", 60'000'000'000},
    {"h", 3'600'000'000'000},
}};

constexpr std::uint64_t kMaxNanos =
    static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());

bool is_digit(char c) { return c >= '0' && c <= '9'; }

[[noreturn]] void reject(std::string_view text, std::string_view why) {
  throw DurationError("invalid duration \"" + std::string(text) + "\": " + std::string(why));
}

}  // namespace

std::chrono::nanoseconds parse_duration(std::string_view text) {
  if (text.empty()) reject(text, "empty (use e.g. 30s, 500ms, 2m, 1h)");
  if (text == "0") return std::chrono::nanoseconds::zero();
  if (text.front() == '-') reject(text, "negative durations are not allowed");
  if (text.front() == '+') reject(text, "no sign allowed");

  std::uint64_t total = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    // Integer part, with overflow detection: kMaxNanos is the bound for any unit.
    std::uint64_t whole = 0;
    std::size_t start = i;
    bool too_large = false;
    while (i < text.size() && is_digit(text[i])) {
      auto digit = static_cast<std::uint64_t>(text[i] - '0');
      if (whole > (kMaxNanos - digit) / 10) too_large = true;
      if (!too_large) whole = whole * 10 + digit;
      ++i;
    }
    bool has_whole = i > start;

    // Fraction part, kept as digits/10^n with at most 18 significant digits.
    std::uint64_t frac = 0;
    std::uint64_t frac_scale = 1;
    bool has_frac = false;
    if (i < text.size() && text[i] == '.') {
      ++i;
      while (i < text.size() && is_digit(text[i])) {
        if (frac_scale < 1'000'000'000'000'000'000ULL) {
          frac = frac * 10 + static_cast<std::uint64_t>(text[i] - '0');
          frac_scale *= 10;
        }
        has_frac = true;
        ++i;
      }
    }
    if (!has_whole && !has_frac) {
      reject(text, "expected a number at \"" + std::string(text.substr(start)) + "\"");
    }

    // Unit.
    std::size_t unit_start = i;
    // A unit runs up to the next number (or a sign, which is then reported as such).
    while (i < text.size() && !is_digit(text[i]) && text[i] != '.' && text[i] != '-' &&
           text[i] != '+') {
      ++i;
    }
    std::string_view unit_text = text.substr(unit_start, i - unit_start);
    if (unit_text.empty()) {
      reject(text, "missing unit after \"" + std::string(text.substr(start, i - start)) +
                       "\" (one of ns, us, ms, s, m, h; e.g. 30s)");
    }
    const Unit* unit = nullptr;
    for (const Unit& u : kUnits) {
      if (u.name == unit_text) unit = &u;
    }
    if (unit == nullptr) {
      reject(text, "unknown unit \"" + std::string(unit_text) + "\" (one of ns, us, ms, s, m, h)");
    }

    if (too_large || whole > kMaxNanos / unit->nanos) reject(text, "too large");
    std::uint64_t part = whole * unit->nanos;
    if (frac != 0) {
      // frac/frac_scale < 1, so this adds less than one unit; split to avoid overflow.
      std::uint64_t unit_whole = unit->nanos / frac_scale;
      std::uint64_t unit_rest = unit->nanos % frac_scale;
      // frac * unit_rest can overflow for 18-digit fractions; use long double there,
      // whose 64-bit mantissa loses at most a fraction of a nanosecond.
      auto rest = static_cast<std::uint64_t>(static_cast<long double>(frac) *
                                             static_cast<long double>(unit_rest) /
                                             static_cast<long double>(frac_scale));
      std::uint64_t add = frac * unit_whole + rest;
      if (part > kMaxNanos - add) reject(text, "too large");
      part += add;
    }
    if (total > kMaxNanos - part) reject(text, "too large");
    total += part;
  }
  return std::chrono::nanoseconds(static_cast<std::int64_t>(total));
}

std::chrono::milliseconds whole_milliseconds(std::chrono::nanoseconds d) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d);
  if (ms != d) {
    throw DurationError("invalid duration \"" + format_duration(d) +
                        "\": must be a whole number of milliseconds");
  }
  return ms;
}

std::string format_duration(std::chrono::nanoseconds d) {
  if (d == d.zero()) return "0s";
  std::string out;
  if (d < d.zero()) {
    // Only for messages; parse_duration() never yields a negative value.
    out += '-';
    d = d == d.min() ? d.max() : -d;
  }
  auto count = static_cast<std::uint64_t>(d.count());
  // Largest units first; each unit takes what it can exactly represent.
  for (auto it = kUnits.rbegin(); it != kUnits.rend(); ++it) {
    if (count >= it->nanos) {
      out += std::to_string(count / it->nanos);
      out += it->name;
      count %= it->nanos;
    }
  }
  return out;
}

}  // namespace warden::cli

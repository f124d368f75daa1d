#include "cli/failure.h"

#include <fmt/core.h>

#include <cstdio>

namespace warden::cli {

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  return out;
}

void print_diagnostic(std::string_view message) {
  // Formatted first and written with one call, so that lines from warden and from CMD
  // (which shares our stderr) do not interleave mid-line.
  std::string line = fmt::format("warden: {}\n", message);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace warden::cli

// support/info_fields.h — the "field:value" lines of an INFO-style text (Redis' INFO and
// CLUSTER INFO, wardend's INFO), as field → value. Lines without a colon (section
// headers, blank lines) are skipped; a trailing '\r' is dropped.
#pragma once

#include <map>
#include <sstream>
#include <string>

namespace warden::testing {

inline std::map<std::string, std::string> info_fields(const std::string& text) {
  std::map<std::string, std::string> fields;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (const auto colon = line.find(':'); colon != std::string::npos) {
      fields[line.substr(0, colon)] = line.substr(colon + 1);
    }
  }
  return fields;
}

}  // namespace warden::testing

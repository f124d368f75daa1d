#include "engines/resp_client/glob.h"

namespace warden::engines::resp_client {

std::string glob_escaped(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace warden::engines::resp_client

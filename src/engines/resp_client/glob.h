// engines/resp_client/glob.h — text for the patterns of Redis' SCAN MATCH.
#pragma once

#include <string>
#include <string_view>

namespace warden::engines::resp_client {

// `text` with the glob specials of SCAN MATCH (* ? [ ] \) escaped, so that it matches
// itself only: lock names may hold any byte but NUL.
std::string glob_escaped(std::string_view text);

}  // namespace warden::engines::resp_client

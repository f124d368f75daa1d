// core/client_id.h — the random id an engine puts into the names of what one Client
// creates on its backend (owner ids, request keys, node names), so that no two Clients'
// names collide and a Client can find its own after a lost reply.
#pragma once

#include <string>

namespace warden::core {

// 64 random bits as 16 lower-case hex digits.
std::string random_client_id();

}  // namespace warden::core

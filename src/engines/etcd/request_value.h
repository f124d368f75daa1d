// engines/etcd/request_value.h — the value of a lock request's key (w/, s/; lock_keys.h):
//
//   "warden MODE CLIENT"          a lock's request (and every key written before elections)
//   "warden MODE CLIENT VALUE"    an election's candidate with a non-empty value
//
// MODE is "exclusive" or "shared", CLIENT the Client's id (hex, never a space). VALUE is
// every byte after the space that ends CLIENT, as given (any bytes, no escaping): it is
// the last field, so its end is the value's end and it needs no length. An empty value
// is written as no value; both read as empty. Readers that know only the first three
// fields (operators, older clients) still read MODE and CLIENT where they were.
#pragma once

#include <string>
#include <string_view>

#include "warden/types.h"

namespace warden::engines::etcd {

// The value of a request key for `client` in `mode`, carrying `value` (may be empty).
std::string request_value(Mode mode, std::string_view client, std::string_view value);

// The candidate's value in a request key's stored value; empty when it carries none, or
// is not a warden request's value at all.
std::string_view candidate_value(std::string_view stored);

}  // namespace warden::engines::etcd

// torture/primitive.h — what a `warden torture` run's clients take: a lock, one permit
// of a semaphore, or the leadership of an election. Each is judged by what it promises:
// a lock and a leadership by mutual exclusion and the fence (a leader's term is its
// token), a semaphore by how many hold at once.
#pragma once

#include <optional>
#include <string_view>

namespace warden::torture {

enum class Primitive { lock, semaphore, election };

inline const char* to_string(Primitive p) {
  switch (p) {
    case Primitive::lock:
      return "lock";
    case Primitive::semaphore:
      return "semaphore";
    case Primitive::election:
      return "election";
  }
  return "lock";
}

inline std::optional<Primitive> primitive_from(std::string_view text) {
  for (Primitive p : {Primitive::lock, Primitive::semaphore, Primitive::election}) {
    if (text == to_string(p)) return p;
  }
  return std::nullopt;
}

}  // namespace warden::torture

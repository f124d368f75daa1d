#include "core/client_id.h"

#include <cstdint>
#include <random>

namespace warden::core {

std::string random_client_id() {
  std::random_device device;
  const std::uint64_t bits = (std::uint64_t{device()} << 32) ^ device();
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(16, '0');
  for (int i = 0; i < 16; ++i) id[static_cast<std::size_t>(i)] = kHex[(bits >> (4 * i)) & 0xf];
  return id;
}

}  // namespace warden::core

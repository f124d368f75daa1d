#include "server/durable_state.h"

namespace warden::server {

DurableState::DurableState(const std::string& data_dir, bool reset_state)
    : tokens_(StateFile::open(data_dir, StateFileOptions{reset_state}), Clock::now()) {}

std::uint64_t DurableState::embargo_ms(Time now) const {
  return static_cast<std::uint64_t>(tokens_.embargo_left(now).count());
}

void DurableState::note_hold(std::chrono::milliseconds ttl_plus_delay) {
  tokens_.note_hold(ttl_plus_delay);
}

}  // namespace warden::server

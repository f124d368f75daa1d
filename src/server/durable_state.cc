#include "server/durable_state.h"

#include <utility>

namespace warden::server {

DurableState::DurableState(const std::string& data_dir, bool reset_state)
    : DurableState(StateFile::open(data_dir, StateFileOptions{reset_state}), Clock::now()) {}

DurableState::DurableState(StateFile file, Time started)
    : taken_(TableSnapshotFile::take(file.dir(), file.record())),
      tokens_(std::move(file), started,
              DurableTokensOptions{.clean_restart = taken_.snapshot.has_value()}) {}

std::uint64_t DurableState::embargo_ms(Time now) const {
  return static_cast<std::uint64_t>(tokens_.embargo_left(now).count());
}

void DurableState::note_hold(std::chrono::milliseconds ttl_plus_delay) {
  tokens_.note_hold(ttl_plus_delay);
}

void DurableState::save_table(TableSnapshot snapshot) {
  snapshot.state = tokens_.durable();
  TableSnapshotFile::write(tokens_.file().dir(), snapshot);
}

}  // namespace warden::server

#include "torture/nemesis.h"

namespace warden::torture {

const char* to_string(Nemesis nemesis) {
  switch (nemesis) {
    case Nemesis::none:
      return "none";
    case Nemesis::pause_holder:
      return "pause-holder";
    case Nemesis::kill_holder:
      return "kill-holder";
    case Nemesis::kill_waiter:
      return "kill-waiter";
    case Nemesis::pause_server:
      return "pause-server";
    case Nemesis::kill_server:
      return "kill-server";
    case Nemesis::restart_server:
      return "restart-server";
    case Nemesis::partition_client:
      return "partition-client";
    case Nemesis::failover:
      return "failover";
    case Nemesis::kill_leader:
      return "kill-leader";
    case Nemesis::pause_leader:
      return "pause-leader";
    case Nemesis::restart_cell:
      return "restart-cell";
    case Nemesis::partition_leader:
      return "partition-leader";
  }
  return "?";
}

std::vector<Nemesis> all_nemeses() {
  return {Nemesis::none,
          Nemesis::pause_holder,
          Nemesis::kill_holder,
          Nemesis::kill_waiter,
          Nemesis::pause_server,
          Nemesis::kill_server,
          Nemesis::restart_server,
          Nemesis::partition_client,
          Nemesis::failover,
          Nemesis::kill_leader,
          Nemesis::pause_leader,
          Nemesis::restart_cell,
          Nemesis::partition_leader};
}

std::optional<Nemesis> nemesis_from(const std::string& name) {
  for (Nemesis n : all_nemeses()) {
    if (name == to_string(n)) return n;
  }
  return std::nullopt;
}

bool hits_server(Nemesis nemesis) {
  return nemesis == Nemesis::pause_server || nemesis == Nemesis::kill_server ||
         nemesis == Nemesis::restart_server || needs_master(nemesis) ||
         nemesis == Nemesis::restart_cell;
}

bool needs_master(Nemesis nemesis) {
  return nemesis == Nemesis::failover || nemesis == Nemesis::kill_leader ||
         nemesis == Nemesis::pause_leader || nemesis == Nemesis::partition_leader;
}

}  // namespace warden::torture

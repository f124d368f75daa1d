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
  }
  return "?";
}

std::vector<Nemesis> all_nemeses() {
  return {Nemesis::none,           Nemesis::pause_holder,     Nemesis::kill_holder,
          Nemesis::kill_waiter,    Nemesis::pause_server,     Nemesis::kill_server,
          Nemesis::restart_server, Nemesis::partition_client, Nemesis::failover};
}

std::optional<Nemesis> nemesis_from(const std::string& name) {
  for (Nemesis n : all_nemeses()) {
    if (name == to_string(n)) return n;
  }
  return std::nullopt;
}

bool hits_server(Nemesis nemesis) {
  return nemesis == Nemesis::pause_server || nemesis == Nemesis::kill_server ||
         nemesis == Nemesis::restart_server || nemesis == Nemesis::failover;
}

}  // namespace warden::torture

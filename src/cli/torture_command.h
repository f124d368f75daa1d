// cli/torture_command.h — `warden torture`: fault injection against a lock service,
// and the verdict on what it guaranteed (src/torture, docs/guarantees.md).
//
//   warden torture --url U [--clients N] [--duration D] [--ttl D] [--nemesis NAME]
//                  [--seed X] [--out DIR] [--epsilon D]
//                  [--server-pid PID --server-restart CMD]...
//
// Also registers the two hidden subcommands a run starts itself as: the resource
// (`torture-resource`) and each client (`torture-client`).
#pragma once

#include "cli/commands.h"

namespace warden::cli {

void add_torture_command(Commands& commands);

}  // namespace warden::cli

// cli/server_command.h — `warden server`: the lock server, same as the wardend binary.
#pragma once

#include "cli/commands.h"

namespace warden::cli {

void add_server_command(Commands& commands);

}  // namespace warden::cli

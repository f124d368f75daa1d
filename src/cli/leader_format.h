// cli/leader_format.h — how `warden leader` prints who leads an election: one line for
// people, or one JSON object on one line, so that `--watch` prints one per change.
#pragma once

#include <optional>
#include <string>

#include "warden/election.h"

namespace warden::cli {

// "election G/N: term T, leader VALUE\n", or "election G/N: no leader\n". The value
// comes last, so everything after "leader " is the value (control bytes as \xNN).
std::string leader_text(const std::string& group, const std::string& name,
                        const std::optional<Leader>& leader);

//   {"url", "election": "G/N", "leader": {"value", "term"}}   or "leader": null
// on one line, ending with a newline.
std::string leader_json(const std::string& url, const std::string& group, const std::string& name,
                        const std::optional<Leader>& leader);

}  // namespace warden::cli

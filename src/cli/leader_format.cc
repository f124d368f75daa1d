#include "cli/leader_format.h"

#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "cli/failure.h"

namespace warden::cli {

std::string leader_text(const std::string& group, const std::string& name,
                        const std::optional<Leader>& leader) {
  const std::string election = printable(group + '/' + name);
  if (!leader) return fmt::format("election {}: no leader\n", election);
  return fmt::format("election {}: term {}, leader {}\n", election, leader->term,
                     printable(leader->value));
}

std::string leader_json(const std::string& url, const std::string& group, const std::string& name,
                        const std::optional<Leader>& leader) {
  using nlohmann::json;
  const json who = leader ? json{{"value", leader->value}, {"term", leader->term}} : json(nullptr);
  // Values and names may hold any byte but NUL; the JSON text must stay valid UTF-8.
  return json{{"url", url}, {"election", group + '/' + name}, {"leader", who}}.dump(
             -1, ' ', false, json::error_handler_t::replace) +
         "\n";
}

}  // namespace warden::cli

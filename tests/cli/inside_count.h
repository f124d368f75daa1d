// cli/inside_count.h — how many commands run inside a lock at once, as the commands
// themselves see it: the CMD that an end-to-end `warden run` test runs under the lock.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

namespace warden::cli::testing {

class InsideCount {
 public:
  // Keeps its marks and counts in `dir`, which must exist and outlive it.
  explicit InsideCount(const std::filesystem::path& dir)
      : inside_((dir / "inside").string()), counts_((dir / "counts").string()) {
    std::filesystem::create_directory(inside_);
  }

  // A shell command that marks itself inside (a directory per process), records how many
  // are inside, stays `stay_s` seconds, leaves, and then runs `then`. mkdir and ls are
  // atomic enough: a count is taken after the command's own mark and before its removal,
  // so it sees every command inside then.
  std::string command(const std::string& stay_s, const std::string& then) const {
    return "mkdir " + inside_ + "/$$ && ls " + inside_ + " | wc -l >> " + counts_ + " && sleep " +
           stay_s + " && rmdir " + inside_ + "/$$ && " + then;
  }

  struct Seen {
    int commands = 0;  // counts recorded: one per command that got inside
    int most = 0;      // the most commands inside at once
  };
  Seen seen() const {
    Seen seen;
    std::ifstream in(counts_);
    for (int n; in >> n; ++seen.commands) seen.most = std::max(seen.most, n);
    return seen;
  }

 private:
  std::string inside_;
  std::string counts_;
};

}  // namespace warden::cli::testing

#include "cli/print.h"

#include <cstdio>

namespace warden::cli {

void print(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

}  // namespace warden::cli

// cli/print.h — writing a command's output to stdout as it comes.
#pragma once

#include <string_view>

namespace warden::cli {

// Writes `text` to stdout and flushes it: a reader at the other end of a pipe (a watch's
// reader, a log) sees each line when it is printed, not when the buffer fills.
void print(std::string_view text);

}  // namespace warden::cli

#include "fenced_counter.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string>

namespace warden::testing {
namespace {

struct State {
  std::uint64_t highest = 0;  // highest token an exclusive holder was admitted with
  std::uint64_t counter = 0;
};

// The file, open and flock()ed for the lifetime of one call.
class Locked {
 public:
  explicit Locked(const std::filesystem::path& file)
      : fd_(::open(file.c_str(), O_RDWR | O_CREAT, 0644)) {
    if (fd_ < 0 || ::flock(fd_, LOCK_EX) != 0) {
      if (fd_ >= 0) ::close(fd_);
      throw std::runtime_error("fenced counter: cannot open and lock " + file.string());
    }
  }
  ~Locked() { ::close(fd_); }  // closing drops the flock
  Locked(const Locked&) = delete;
  Locked& operator=(const Locked&) = delete;

  State read() const {
    char buf[64] = {};
    const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    State s;
    if (n > 0) {
      unsigned long long highest = 0, counter = 0;
      if (std::sscanf(buf, "%llu %llu", &highest, &counter) != 2) {
        throw std::runtime_error("fenced counter: corrupt file");
      }
      s.highest = highest;
      s.counter = counter;
    }
    return s;
  }

  void write(const State& s) const {
    const std::string text = std::to_string(s.highest) + " " + std::to_string(s.counter) + "\n";
    if (::ftruncate(fd_, 0) != 0 ||
        ::pwrite(fd_, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
      throw std::runtime_error("fenced counter: cannot write");
    }
  }

 private:
  int fd_;
};

}  // namespace

FencedCounter::FencedCounter(std::filesystem::path file) : file_(std::move(file)) {
  const Locked create(file_);
}

std::optional<std::uint64_t> FencedCounter::read_exclusive(std::uint64_t token) const {
  const Locked f(file_);
  State s = f.read();
  if (token < s.highest) return std::nullopt;
  if (token > s.highest) {
    s.highest = token;
    f.write(s);
  }
  return s.counter;
}

std::optional<std::uint64_t> FencedCounter::read_shared(std::uint64_t token) const {
  const Locked f(file_);
  const State s = f.read();
  if (token < s.highest) return std::nullopt;
  return s.counter;
}

FencedCounter::Write FencedCounter::increment(std::uint64_t token, std::uint64_t expected) const {
  const Locked f(file_);
  State s = f.read();
  if (token < s.highest) return Write::stale;
  if (s.counter != expected) return Write::changed;
  s.highest = token;
  s.counter = expected + 1;
  f.write(s);
  return Write::ok;
}

std::uint64_t FencedCounter::value() const { return Locked(file_).read().counter; }

}  // namespace warden::testing

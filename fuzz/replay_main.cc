// fuzz/replay_main.cc — runs a libFuzzer entry point without libFuzzer.
//
// Linked with a fuzz target's LLVMFuzzerTestOneInput, this gives a plain executable
// (any compiler) that feeds it every file of the given corpus directories, then
// pseudo-random mutations of them from a fixed seed until --mutations are done or
// --seconds have passed. It is a regression test for the target, not a fuzzer: there is
// no coverage feedback. When the target aborts or a sanitizer stops it, the input that
// did it is written to ./replay-crash.
//
//   <target>_replay [--seconds=2] [--mutations=1000000] [--seed=1] [--max-len=4096]
//                    DIR_OR_FILE...
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
// Provided by the sanitizer runtimes when they are linked in.
extern "C" __attribute__((weak)) void __sanitizer_set_death_callback(void (*callback)());

namespace {

namespace fs = std::filesystem;
using Bytes = std::string;

// The program's name for messages ("uri_fuzz_replay"), set first thing in main.
std::string g_name = "fuzz_replay";

struct Options {
  double seconds = 2;
  std::uint64_t mutations = 1'000'000;
  std::uint64_t seed = 1;
  std::size_t max_len = 4096;
  std::vector<fs::path> inputs;
};

[[noreturn]] void usage(const char* message) {
  std::fprintf(stderr,
               "%s: %s\nusage: %s [--seconds=S] [--mutations=N] [--seed=N] [--max-len=N] "
               "DIR_OR_FILE...\n",
               g_name.c_str(), message, g_name.c_str());
  std::exit(2);
}

Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const auto value = [&](std::string_view name) -> const char* {
      return arg.starts_with(name) ? argv[i] + name.size() : nullptr;
    };
    if (const char* seconds = value("--seconds=")) {
      options.seconds = std::strtod(seconds, nullptr);
    } else if (const char* mutations = value("--mutations=")) {
      options.mutations = std::strtoull(mutations, nullptr, 10);
    } else if (const char* seed = value("--seed=")) {
      options.seed = std::strtoull(seed, nullptr, 10);
    } else if (const char* max_len = value("--max-len=")) {
      options.max_len = std::strtoull(max_len, nullptr, 10);
    } else if (arg.starts_with("-")) {
      usage("unknown option");
    } else {
      options.inputs.emplace_back(arg);
    }
  }
  if (options.inputs.empty()) usage("no corpus given");
  return options;
}

Bytes read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<Bytes> load_corpus(const std::vector<fs::path>& inputs) {
  std::vector<fs::path> files;
  for (const auto& input : inputs) {
    if (fs::is_directory(input)) {
      for (const auto& entry : fs::directory_iterator(input)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
    } else if (fs::is_regular_file(input)) {
      files.push_back(input);
    } else {
      std::fprintf(stderr, "%s: no such file or directory: %s\n", g_name.c_str(),
                   input.string().c_str());
      std::exit(2);
    }
  }
  std::sort(files.begin(), files.end());  // the same order, hence the same mutations, everywhere
  std::vector<Bytes> corpus;
  for (const auto& file : files) corpus.push_back(read_file(file));
  return corpus;
}

// The input being run, written to ./replay-crash if the run dies.
const Bytes* g_current = nullptr;
std::string g_note;  // what save_current says, built in main

void save_current() {
  if (g_current == nullptr) return;
  const int fd = ::open("replay-crash", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  std::size_t done = 0;
  while (done < g_current->size()) {
    const ssize_t n = ::write(fd, g_current->data() + done, g_current->size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  // Built beforehand: this runs in a signal handler.
  [[maybe_unused]] const ssize_t ignored = ::write(2, g_note.data(), g_note.size());
}

void on_abort(int sig) {
  save_current();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// A failed check aborts; a sanitizer report ends in the sanitizers' death callback.
void save_input_on_failure() {
  std::signal(SIGABRT, on_abort);
  std::signal(SIGSEGV, on_abort);
  if (__sanitizer_set_death_callback != nullptr) __sanitizer_set_death_callback(save_current);
}

void run(const Bytes& input) {
  g_current = &input;
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
  g_current = nullptr;
}

// Byte strings that mean something to RESP parsers, for insertion.
constexpr std::string_view kTokens[] = {"*",
                                        "$",
                                        "\r\n",
                                        "\r",
                                        "\n",
                                        " ",
                                        "-1",
                                        "0",
                                        "1",
                                        "16",
                                        "17",
                                        "-",
                                        "*1\r\n",
                                        "$4\r\n",
                                        "*0\r\n",
                                        "*-1\r\n",
                                        "$0\r\n\r\n",
                                        "9223372036854775807",
                                        "9223372036854775808",
                                        "18446744073709551616",
                                        "65535",
                                        "65536",
                                        "PING",
                                        "ACQUIRE",
                                        std::string_view("\0", 1)};

class Mutator {
 public:
  Mutator(std::uint64_t seed, std::size_t max_len) : rng_(seed), max_len_(max_len) {}

  Bytes mutate(const std::vector<Bytes>& corpus) {
    Bytes b = corpus.empty() ? Bytes() : corpus[below(corpus.size())];
    const std::size_t steps = 1 + below(4);
    for (std::size_t i = 0; i < steps; ++i) step(b, corpus);
    if (b.size() > max_len_) b.resize(max_len_);
    return b;
  }

 private:
  std::size_t below(std::size_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_);
  }
  char any_byte() { return static_cast<char>(below(256)); }

  void step(Bytes& b, const std::vector<Bytes>& corpus) {
    const std::size_t at = below(b.size() + 1);
    switch (below(9)) {
      case 0:  // flip a bit
        if (!b.empty()) {
          char& c = b[below(b.size())];
          c = static_cast<char>(static_cast<unsigned char>(c) ^ (1U << below(8)));
        }
        break;
      case 1:  // overwrite a byte
        if (!b.empty()) b[below(b.size())] = any_byte();
        break;
      case 2:  // insert a byte
        b.insert(at, 1, any_byte());
        break;
      case 3:  // insert a token
        b.insert(at, kTokens[below(std::size(kTokens))]);
        break;
      case 4:  // erase a run
        b.erase(at, 1 + below(16));
        break;
      case 5:  // duplicate a run
        if (!b.empty()) {
          const std::size_t from = below(b.size());
          b.insert(at, b.substr(from, 1 + below(b.size() - from)));
        }
        break;
      case 6:  // truncate
        b.resize(at);
        break;
      case 7:  // splice in another corpus entry
        if (!corpus.empty()) b.insert(at, corpus[below(corpus.size())]);
        break;
      case 8:  // replace a digit with other digits
        if (const auto d = b.find_first_of("0123456789", below(b.size() + 1)); d != Bytes::npos) {
          b.replace(d, 1, std::to_string(rng_() >> below(64)));
        }
        break;
    }
  }

  std::mt19937_64 rng_;
  std::size_t max_len_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc > 0) g_name = fs::path(argv[0]).filename().string();
  g_note = g_name + ": failing input written to replay-crash\n";
  const Options options = parse_options(argc, argv);
  const std::vector<Bytes> corpus = load_corpus(options.inputs);
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };

  save_input_on_failure();
  run(Bytes());
  for (const auto& input : corpus) run(input);

  Mutator mutator(options.seed, options.max_len);
  std::uint64_t done = 0;
  while (done < options.mutations && elapsed() < options.seconds) {
    run(mutator.mutate(corpus));
    ++done;
  }
  std::printf("%s: %zu corpus inputs, %llu mutations (seed %llu) in %.2f s, no failure\n",
              g_name.c_str(), corpus.size(), static_cast<unsigned long long>(done),
              static_cast<unsigned long long>(options.seed), elapsed());
  return 0;
}

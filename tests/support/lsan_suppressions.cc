// LeakSanitizer's suppressions for every test executable (tests/CMakeLists.txt compiles
// this file into each): leaks inside other projects' libraries that warden cannot free,
// each with the reason. Everything else a test leaks fails it.
//
// - libcares: gRPC resolves "localhost" through c-ares, which keeps a few bytes for the
//   life of the process.
// - zookeeper_process: the ZooKeeper C client queues a watch event it has read
//   (a completion entry with the event's buffer and watchers) for its completion thread;
//   zookeeper_close() frees the handle without processing or freeing that queue
//   (ZOOKEEPER-2894 and ZOOKEEPER-3868, still so in Debian 12's 3.8.0). A session closed
//   while a watch fired leaks that one entry.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libcares.so\n"
         "leak:zookeeper_process\n";
}

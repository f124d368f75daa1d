// gRPC resolves "localhost" through c-ares, which keeps a few bytes for the life of the
// process (libcares, not warden): LeakSanitizer is told to let that one be.
extern "C" const char* __lsan_default_suppressions() { return "leak:libcares.so\n"; }

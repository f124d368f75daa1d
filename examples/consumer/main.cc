// A small program against warden's public API: a lock held through std::unique_lock,
// explicit leases with fencing tokens and sequencers, and a FenceGate that turns away
// a writer whose token is stale. Exits 0 only if every promise it checks holds.
#include <warden/warden.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string_view>

namespace {

bool expect(bool ok, std::string_view what) {
  if (!ok) std::cerr << "warden_consumer: FAILED: " << what << '\n';
  return ok;
}

}  // namespace

int main() {
  using namespace std::chrono_literals;
  try {
    std::cout << "warden " << WARDEN_VERSION_STRING << '\n';
    warden::Client client = warden::Client::open("mem://");
    warden::Lock job = client.lock("demo", "job");

    // Standard RAII: Lock is TimedLockable, so std::unique_lock works with it.
    std::uint64_t guarded_token = 0;
    {
      std::unique_lock guard(job);
      guarded_token = job.token();
      std::cout << "unique_lock held demo/job, token " << guarded_token << '\n';
    }
    bool ok = expect(guarded_token != 0, "a held lock has a fencing token");
    ok = expect(job.token() == 0, "the lock is released when unique_lock ends") && ok;

    // Explicit lease: the token and sequencer go with every write to the resource.
    warden::FenceGate gate;
    warden::Lease first = job.acquire(warden::Mode::exclusive, warden::Wait::up_to(2s));
    if (!expect(first.valid(), "acquire of a free lock succeeds")) return EXIT_FAILURE;
    const std::uint64_t first_token = first.token();
    std::cout << "lease token " << first_token << ", sequencer " << first.sequencer().str() << '\n';
    ok = expect(first_token > guarded_token, "tokens of successive grants increase") && ok;
    ok = expect(client.check(first.sequencer()), "check() confirms a held sequencer") && ok;
    ok = expect(gate.admit(first.sequencer()), "the gate admits the current holder") && ok;
    first.release();
    ok = expect(!first.valid(), "a released lease is empty") && ok;

    warden::Lease second = job.acquire(warden::Mode::exclusive, warden::Wait::up_to(2s));
    if (!expect(second.valid(), "the released lock can be acquired again")) return EXIT_FAILURE;
    std::cout << "next lease token " << second.token() << '\n';
    ok = expect(gate.admit(second.sequencer()), "the gate admits the newer holder") && ok;
    warden::Sequencer stale = second.sequencer();
    stale.token = first_token;  // what a paused former holder would still send
    ok = expect(!gate.admit(stale), "the gate rejects a stale token") && ok;
    second.release();

    if (!ok) return EXIT_FAILURE;
    std::cout << "warden_consumer: ok\n";
    return EXIT_SUCCESS;
  } catch (const warden::Error& e) {
    std::cerr << "warden_consumer: warden::Error(" << warden::to_string(e.code())
              << "): " << e.what() << '\n';
  } catch (const std::exception& e) {
    std::cerr << "warden_consumer: " << e.what() << '\n';
  }
  return EXIT_FAILURE;
}

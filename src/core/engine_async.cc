// The default asynchronous acquire of an engine (core/engine.h): the blocking acquire on
// a thread of its own. Engines with a non-blocking client path override it.
#include <exception>
#include <optional>
#include <thread>
#include <utility>

#include "core/engine.h"

namespace warden::core {

void Engine::acquire_async(AcquireRequest request, AcquireDone done) {
  // `done` keeps the engine's owner (the Client) alive until it has been called, so the
  // thread may use the engine until then, and nothing of it afterwards.
  auto wait = [this](AcquireRequest waiting, AcquireDone finish) {
    std::optional<Granted> granted;
    std::exception_ptr error;
    try {
      granted = acquire(waiting);
    } catch (...) {
      error = std::current_exception();
    }
    finish(std::move(granted), error);
  };
  auto shared_done = std::make_shared<AcquireDone>(std::move(done));
  try {
    std::thread(wait, std::move(request), [shared_done](std::optional<Granted> granted,
                                                        std::exception_ptr error) {
      (*shared_done)(std::move(granted), error);
    }).detach();
  } catch (...) {  // no thread to be had: the acquire fails, having asked nothing
    (*shared_done)(std::nullopt, std::make_exception_ptr(Error(
                                     Errc::resource_exhausted,
                                     "no thread left to wait for an asynchronous acquire")));
  }
}

}  // namespace warden::core

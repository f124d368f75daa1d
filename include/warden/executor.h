// warden/executor.h — where an asynchronous outcome runs (warden/async.h, Lease::release_async).
#pragma once

#include <functional>

namespace warden {

// Where an outcome is run: given the work, runs it later on a thread of the caller's
// choosing (an event loop's post). It must run every piece it accepts, once; one it
// refuses by throwing is run on the spot instead (on the thread that told the outcome).
using Executor = std::function<void(std::function<void()>)>;

}  // namespace warden

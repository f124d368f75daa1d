// Client::open: the URI chooses the engine (engine_registry.h), the core wraps it.
#include <memory>
#include <string_view>

#include "compose/engine_registry.h"
#include "core/client_state.h"
#include "core/names.h"
#include "core/uri.h"
#include "warden/client.h"

namespace warden {

Client Client::open(std::string_view uri_text, ClientOptions options) {
  core::validate_client_options(options);
  const core::Uri uri = core::Uri::parse(uri_text);
  std::shared_ptr<core::Engine> engine = compose::open_engine(uri, options);
  return Client(std::make_shared<detail::ClientState>(uri.redacted(), options, std::move(engine)));
}

}  // namespace warden

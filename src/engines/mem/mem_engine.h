// engines/mem/mem_engine.h — mem://[NAME]: the LockTable inside this process.
//
// Every engine opened with the same NAME in one process shares one table (mem:// is
// NAME "default"); the table lives while any engine on it does. Waits block on a
// condition variable; waiting threads drive the table's clock, so no thread of its
// own is needed.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string_view>

#include "core/engine.h"
#include "core/uri.h"
#include "table/lock_table.h"
#include "warden/options.h"

namespace warden::engines::mem {

std::unique_ptr<core::Engine> open(const core::Uri& uri, const ClientOptions& options);

// mem_inspect.cc: one lock of `table` as a status (times left measured from `now`), and
// every lock of `group` in it. The caller holds the table's lock and advanced it to now.
LockStatus status_of(const table::LockTable& table, const core::LockKey& key, table::Time now);
std::vector<LockSummary> summaries_of(const table::LockTable& table, std::string_view group);

// Test hook: makes table NAME forget every grant of `key` ("group/name") as if its
// leases had ended, without telling the holders. false if no such table is open.
bool drop_grants(std::string_view table_name, std::string_view key);

// Test hook: how many requests wait in table NAME's queue for `key` ("group/name");
// nullopt if no such table is open.
std::optional<std::size_t> queued(std::string_view table_name, std::string_view key);

}  // namespace warden::engines::mem

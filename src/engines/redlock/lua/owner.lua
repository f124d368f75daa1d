-- owner.lua — what every redlock:// script shares. On each master a lock is two keys
-- with the hash tag {warden:GROUP/NAME} (docs/engines/redlock.md):
--
--   :rl  string  "OWNER" while its acquire is under way, "OWNER:TOKEN" once fence.lua
--                fixed its token; expires after the lease (PX)
--   :rf  string  the last token written for the lock (decimal); lives at least the TTL
--                of the grant that wrote or last renewed it, so an idle lock leaves
--                nothing behind (tokens then rest on the clock floor alone)
--   :rx:OWNER    a failed attempt's withdrawal that found no key (withdraw.lua); lives
--                as long as the lease would have
--
-- OWNER (a client id and a sequence number) holds no ':', so the token is what follows
-- the last ':'. Scripts include this file with a line "--! owner.lua" (at build time:
-- EVAL scripts cannot include one another).

-- Is `value` (the :rl key, or false if absent) held by `owner`, before or after fence.lua?
local function is_ours(value, owner)
  if not value then return false end
  return value == owner or string.sub(value, 1, #owner + 1) == owner .. ':'
end

-- Decimal texts without leading zeros compared as numbers: Lua's numbers are doubles,
-- which cannot hold every 64-bit token.
local function greater(a, b)
  if #a ~= #b then return #a > #b end
  return a > b
end

-- Makes `key` live at least `ms` more milliseconds: GT never shortens its life, and NX
-- gives one without an expiry (just created, or kept from before :rf expired) its first.
local function extend(key, ms)
  if redis.call('PEXPIRE', key, ms, 'GT') == 0 then redis.call('PEXPIRE', key, ms, 'NX') end
end

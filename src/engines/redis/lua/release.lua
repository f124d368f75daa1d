-- release.lua — gives up one grant.
-- KEYS: h i q w p of the lock
-- ARGV: channel, token, owner
-- Returns 1 if the owner held the grant, 0 if it was not held (already released, run
-- out, or never this owner's): release is idempotent, and nobody else's grant can be
-- released by knowing its token.
local k = lock_keys(1)
local channel, token, owner = ARGV[1], ARGV[2], ARGV[3]
local now = clock()
-- A lease that ran out is an expiry, not a release: its lock_delay applies.
local freed = expire_holders(k, now)
if evict_waiters(k, now) then freed = true end
local held = 0
local info = redis.call('HGET', k.i, 't:' .. token)
if info then
  local _, _, holder = parse_holder(info)
  if holder == owner then
    drop_holder(k, token, owner)
    held = 1
    freed = true
  end
end
settle(k, now, channel, freed, nil)
housekeep(k, now)
return held

-- renew.lua — renews a batch of grants, of any locks, in one call (the watchdog's
-- round). Only grants whose lease is still running are renewed: an expired one is
-- never brought back.
-- KEYS: h1 i1 h2 i2 ... (holders and info keys of each grant's lock)
-- ARGV: token1 owner1 ttl1 token2 owner2 ttl2 ...
-- Returns one 1 (renewed) or 0 (no longer held) per grant, in order.
--! lock_base.lua
--! lock.lua
local now = clock()

-- One grant of the hash form: the exclusive holder in :i's x, or a shared one in :h.
local function renew_in_hash(h, i, token, owner, ttl)
  local exclusive = redis.call('HGET', i, 'x')
  local t, deadline, lock_delay, holder
  if exclusive then t, deadline, lock_delay, holder = parse_exclusive(exclusive) end
  if t == token then
    if deadline <= now or holder ~= owner then return 0 end
    redis.call('HSET', i, 'x', exclusive_value(t, now + ttl, lock_delay, owner))
    -- The key must outlive the longer lease; GT never shortens it.
    redis.call('PEXPIRE', i, fmt(ttl + lock_delay + 1000), 'GT')
    return 1
  end
  local score = tonumber(redis.call('ZSCORE', h, token) or '0')
  local info = redis.call('HGET', i, 't:' .. token)
  if score <= now or not info then return 0 end
  lock_delay, holder = parse_shared(info)
  if holder ~= owner then return 0 end
  redis.call('ZADD', h, 'XX', now + ttl, token)
  local ms = fmt(ttl + lock_delay + 1000)
  redis.call('PEXPIRE', h, ms, 'GT')
  redis.call('PEXPIRE', i, ms, 'GT')
  return 1
end

local result = {}
for n = 1, #KEYS / 2 do
  local h, i = KEYS[2 * n - 1], KEYS[2 * n]
  local token, owner, ttl = ARGV[3 * n - 2], ARGV[3 * n - 1], ARGV[3 * n]
  if redis.call('TYPE', i).ok ~= 'string' then
    result[n] = renew_in_hash(h, i, token, owner, tonumber(ttl))
  elseif redis.call('GET', i) == token .. ' ' .. owner then
    -- The string form (lock_base.lua): its expiry is its lease.
    redis.call('PEXPIRE', i, ttl)
    result[n] = 1
  else
    result[n] = 0
  end
end
return result

-- renew.lua — renews a batch of grants, of any locks, in one call (the watchdog's
-- round). Only grants whose lease is still running are renewed: an expired one is
-- never brought back.
-- KEYS: h1 i1 h2 i2 ... (holders and info keys of each grant's lock)
-- ARGV: token1 owner1 ttl1 token2 owner2 ttl2 ...
-- Returns one 1 (renewed) or 0 (no longer held) per grant, in order.
--! lock_base.lua
--! lock.lua
local now = clock()
local result = {}
for n = 1, #KEYS / 2 do
  local h, i = KEYS[2 * n - 1], KEYS[2 * n]
  local token, owner, ttl = ARGV[3 * n - 2], ARGV[3 * n - 1], tonumber(ARGV[3 * n])
  result[n] = 0
  local exclusive = redis.call('HGET', i, 'x')
  local t, deadline, lock_delay, holder
  if exclusive then t, deadline, lock_delay, holder = parse_exclusive(exclusive) end
  if t == token then
    if deadline > now and holder == owner then
      redis.call('HSET', i, 'x', exclusive_value(t, now + ttl, lock_delay, owner))
      -- The key must outlive the longer lease; GT never shortens it.
      redis.call('PEXPIRE', i, fmt(ttl + lock_delay + 1000), 'GT')
      result[n] = 1
    end
  else
    local score = tonumber(redis.call('ZSCORE', h, token) or '0')
    local info = redis.call('HGET', i, 't:' .. token)
    if score > now and info then
      lock_delay, holder = parse_shared(info)
      if holder == owner then
        redis.call('ZADD', h, 'XX', now + ttl, token)
        local ms = fmt(ttl + lock_delay + 1000)
        redis.call('PEXPIRE', h, ms, 'GT')
        redis.call('PEXPIRE', i, ms, 'GT')
        result[n] = 1
      end
    end
  end
end
return result

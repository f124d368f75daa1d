-- renew.lua — renews a batch of grants, of any locks, in one call (the watchdog's
-- round). Only grants whose lease is still running are renewed: an expired one is
-- never brought back.
-- KEYS: h1 i1 h2 i2 ... (holders and info keys of each grant's lock)
-- ARGV: token1 owner1 ttl1 token2 owner2 ttl2 ...
-- Returns one 1 (renewed) or 0 (no longer held) per grant, in order.
local now = clock()
local result = {}
for n = 1, #KEYS / 2 do
  local h, i = KEYS[2 * n - 1], KEYS[2 * n]
  local token, owner, ttl = ARGV[3 * n - 2], ARGV[3 * n - 1], tonumber(ARGV[3 * n])
  local deadline = tonumber(redis.call('ZSCORE', h, token) or '0')
  local info = redis.call('HGET', i, 't:' .. token)
  result[n] = 0
  if deadline > now and info then
    local _, lock_delay, holder = parse_holder(info)
    if holder == owner then
      redis.call('ZADD', h, 'XX', now + ttl, token)
      -- The keys must outlive the longer lease; GT never shortens them.
      local ms = fmt(ttl + lock_delay + 1000)
      redis.call('PEXPIRE', h, ms, 'GT')
      redis.call('PEXPIRE', i, ms, 'GT')
      result[n] = 1
    end
  end
end
return result

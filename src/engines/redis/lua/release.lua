-- release.lua — gives up one grant.
-- KEYS: h i q w p of the lock
-- ARGV: channel, token, owner
-- Returns 1 if the owner held the grant, 0 if it was not held (already released, run
-- out, or never this owner's): release is idempotent, and nobody else's grant can be
-- released by knowing its token.

-- The string form (lock_base.lua): the exclusive holder without a lock_delay, nobody
-- else in the lock. It lives exactly as long as its lease, so if it is this owner's
-- grant, the grant is held; either way nobody waits to be told.
if redis.call('TYPE', KEYS[2]).ok == 'string' then
  if redis.call('GET', KEYS[2]) ~= ARGV[2] .. ' ' .. ARGV[3] then return 0 end
  redis.call('DEL', KEYS[2])
  return 1
end

--! lock_base.lua
local k = lock_keys(1)
local channel, token, owner = ARGV[1], ARGV[2], ARGV[3]
local now = clock()

-- The uncontended path of the hash form: the exclusive holder, unexpired, nobody waiting or admitted,
-- no lock_delay running: the lock's keys simply go.
local known = redis.call('HMGET', k.i, 'x', 'delay')
if known[1] and tonumber(known[2] or '0') <= now then
  local t, deadline, _, holder = parse_exclusive(known[1])
  if t == token and holder == owner and deadline > now and
      redis.call('EXISTS', k.w, k.p) == 0 then
    -- An election's leader resigns: its observers are told (lock.lua, announce).
    if redis.call('HEXISTS', k.i, 'v') == 1 then redis.call('SPUBLISH', channel, '~') end
    redis.call('DEL', k.i, k.q)
    return 1
  end
end

--! lock.lua

-- A lease that ran out is an expiry, not a release: its lock_delay applies.
expire_holders(k, now)
evict_waiters(k, now)
local held = 0
local exclusive = redis.call('HGET', k.i, 'x')
if exclusive then
  local t, _, _, holder = parse_exclusive(exclusive)
  if t == token and holder == owner then
    if redis.call('HDEL', k.i, 'x', 'v') == 2 then announce(channel) end
    held = 1
  end
else
  local info = redis.call('HGET', k.i, 't:' .. token)
  if info then
    local _, holder = parse_shared(info)
    if holder == owner then
      drop_shared(k, token, owner)
      held = 1
    end
  end
end
settle(k, now, channel, nil)
housekeep(k, now)
return held

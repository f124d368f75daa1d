-- withdraw.lua — a waiter gives up (timed out, cancelled, or unsure whether its last
-- attempt was answered): its queue entry, liveness, admission and wake list go, and so does a
-- grant made for it whose reply never reached it.
-- KEYS: h i q w p of the lock
-- ARGV: channel, entry
-- Returns 1 if a grant of this waiter was dropped, else 0.
--! lock_base.lua
--! lock.lua
local k = lock_keys(1)
local channel, entry = ARGV[1], ARGV[2]
local owner = string.match(entry, '^%a%d*:%d+:(.*)$')
local now = clock()
as_hash(k, now)
expire_holders(k, now)
evict_waiters(k, now)
redis.call('LREM', k.q, 1, entry)
redis.call('ZREM', k.w, entry)
redis.call('ZREM', k.p, entry)
redis.call('DEL', wake_list(k, entry))
local dropped = 0
local exclusive = redis.call('HGET', k.i, 'x')
if exclusive then
  local _, _, _, holder = parse_exclusive(exclusive)
  if holder == owner then
    if redis.call('HDEL', k.i, 'x', 'v') == 2 then announce(channel) end
    dropped = 1
  end
end
local token = redis.call('HGET', k.i, 'o:' .. owner)
if token then
  drop_shared(k, token, owner)
  dropped = 1
end
-- Leaving the head of the queue (or an admission) can let the next waiters in.
settle(k, now, channel, nil)
housekeep(k, now)
return dropped

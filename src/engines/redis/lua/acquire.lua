-- acquire.lua — one attempt to acquire, by a new request or a waiter polling.
-- KEYS: h i q w p of the lock
-- ARGV: channel, entry ("MODE:LIVE_MS:OWNER"), mode ("x" | "s"), ttl_ms,
--       lock_delay_ms, fair ("1" | "0"), wait ("1": queue up if not granted), owner,
--       capacity, permits (a semaphore's request for `permits` of its `capacity`, mode
--       "s", entry "sPERMITS:LIVE_MS:OWNER"; "0", "0" for a lock's)
--       value (an election candidate's, stored as the grant's 'v'; "" for a lock's)
-- Returns {1, token} when granted, else {0, ms}: how long until something in the lock
-- runs out by itself (a lease, a pick-up, a lock_delay; -1: nothing), so the waiter
-- can look again then. An error INVALID when the lock is a semaphore of another
-- capacity, or a lock asked for permits (or the reverse): nothing changes.

-- The uncontended path, before anything else is even defined: an exclusive request
-- without a lock_delay on a lock nobody holds, waits for or delays (which has no keys
-- at all) is the string form of lock_base.lua, made by SET NX PX. Its token is Redis'
-- clock in microseconds: the lock's last token, if it had one, was at most the clock
-- then, so the clock now is larger. A candidate's value has no room there: it takes
-- the hash form's path below.
local time = redis.call('TIME')
local now_us = tonumber(time[1]) * 1000000 + tonumber(time[2])
if ARGV[3] == 'x' and ARGV[5] == '0' and ARGV[11] == '' and
    redis.call('SET', KEYS[2], string.format('%.0f', now_us) .. ' ' .. ARGV[8],
               'NX', 'PX', ARGV[4]) then
  return {1, now_us}
end

--! lock_base.lua
local k = lock_keys(1)
local channel, entry, mode = ARGV[1], ARGV[2], ARGV[3]
local ttl, lock_delay = tonumber(ARGV[4]), tonumber(ARGV[5])
local fair, wait = ARGV[6] == '1', ARGV[7] == '1'
local owner = ARGV[8]
local capacity, permits = tonumber(ARGV[9]), tonumber(ARGV[10])
local value = ARGV[11]
local live = entry_live(entry)
local now = math.floor(now_us / 1000)

-- The same with a lock_delay or a value, which the string form has no room for: the
-- hash form's one key (four calls), written before the rest of the shared code is
-- defined. The value is written with the grant, so nobody sees the leader without it.
local fresh = redis.call('EXISTS', k.i) == 0
if fresh and mode == 'x' then
  local t = fmt(now_us)
  local fields = {'last', t, 'x', exclusive_value(t, now + ttl, lock_delay, owner)}
  if lock_delay > 0 then
    fields[#fields + 1] = 'ld'
    fields[#fields + 1] = fmt(lock_delay)
  end
  if value ~= '' then
    fields[#fields + 1] = 'v'
    fields[#fields + 1] = value
  end
  mark_caching(fields, owner)
  redis.call('HSET', k.i, unpack(fields))
  redis.call('PEXPIRE', k.i, fmt(ttl + lock_delay + 1000))
  if value ~= '' then redis.call('SPUBLISH', channel, '~') end  -- see announce() in lock.lua
  return {1, now_us}
end

if not fresh then
  -- A semaphore keeps its capacity in 'cap' while it is in use; a lock has none.
  local form = redis.call('TYPE', k.i).ok
  local known = form == 'hash' and redis.call('HGET', k.i, 'cap') or '0'
  if known ~= ARGV[9] then
    return redis.error_reply('INVALID the lock is a semaphore of another number of ' ..
                             'permits, or not one')
  end
  -- A request that will not wait, facing the string form (an exclusive holder alone),
  -- is refused as it stands: nothing to queue or tidy, and the holder keeps its cheap
  -- form.
  if not wait and form == 'string' then
    if caches(string.match(redis.call('GET', k.i), '^%d+ (.*)$')) then
      redis.call('SPUBLISH', channel, '?')
    end
    return {0, math.max(1, redis.call('PTTL', k.i))}
  end
end

--! lock.lua

if fresh then
  local token = grant(k, now, now_us, mode, ttl, lock_delay, owner, true, permits, capacity,
                      value)
  if value ~= '' then announce(channel) end
  return {1, token}
end
as_hash(k, now)

local freed = expire_holders(k, now)
if evict_waiters(k, now) then freed = true end

-- Grants to this request. A waiter's entry goes; if something freed up in this call,
-- the queue may move on behind it.
local function granted(was_waiting)
  if was_waiting then
    redis.call('ZREM', k.p, entry)
    redis.call('ZREM', k.w, entry)
    redis.call('DEL', wake_list(k, entry))  -- a push its BLPOP did not take
  end
  local token = grant(k, now, now_us, mode, ttl, lock_delay, owner, false, permits, capacity,
                     value)
  if value ~= '' then announce(channel) end
  if freed then
    settle(k, now, channel, entry)
  end
  return {1, token}
end

-- Admitted earlier (a message said so, or this is a poll): pick the grant up.
if redis.call('ZSCORE', k.p, entry) then return granted(true) end

-- Fairness only matters on arrival (docs/contract.md): a fair request is granted at
-- once only if nobody waits before it, a non-fair one whenever it is compatible with
-- the holders. Either one that is not granted queues at the tail, and from then on
-- waits its turn like every other waiter: a queued entry never barges.
-- Queued already is read from its liveness, which every queued entry has and loses
-- together with its place (evict_waiters, admit, withdraw.lua): a lookup, where
-- searching the queue itself would scan it on every waiter's every look.
local queued = redis.call('ZSCORE', k.w, entry)
if not queued then
  if delay_over(k, now) and compatible(k, mode, permits) and not (fair and live_head(k)) then
    return granted(wait)
  end
  if wait then redis.call('RPUSH', k.q, entry) end
end
if wait then
  redis.call('ZADD', k.w, now + live, entry)
  local ms = fmt(live + 1000)
  extend(k.w, ms)
  extend(k.q, ms)
  extend(k.i, ms)
end

-- Something may have freed up (an expiry, an evicted waiter): the queue moves on, and
-- it may be this waiter's turn.
local admitted = settle(k, now, channel, entry)
for _, e in ipairs(admitted) do
  if e == entry then
    freed = false  -- settled just now
    return granted(true)
  end
end
housekeep(k, now)
ask_cached_back(k, channel)

local next_change = math.huge
local function consider(key)
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if first[2] and tonumber(first[2]) < next_change then next_change = tonumber(first[2]) end
end
consider(k.h)
consider(k.p)
local blocked_until = number_field(k, 'delay')
if blocked_until > now and blocked_until < next_change then next_change = blocked_until end
if next_change == math.huge then return {0, -1} end
return {0, math.max(1, next_change - now)}

-- lock.lua — the rest of the shared part of the redis:// scripts (after lock_base.lua):
-- holders, waiters, the queue and admissions. Included with "--! lock.lua" after the
-- uncontended paths, so those do not pay for defining all of this.

local function number_field(k, field)
  return tonumber(redis.call('HGET', k.i, field) or '0')
end

-- A shared holder's info "LOCK_DELAY OWNER" -> lock_delay, owner
local function parse_shared(info)
  local lock_delay, owner = string.match(info, '^(%d+) (.*)$')
  return tonumber(lock_delay), owner
end

-- A shared holder goes; a semaphore's gives its permits back.
local function drop_shared(k, token, owner)
  redis.call('ZREM', k.h, token)
  local permits = redis.call('HGET', k.i, 'n:' .. token)
  if permits then redis.call('HINCRBY', k.i, 'held', -tonumber(permits)) end
  redis.call('HDEL', k.i, 't:' .. token, 'o:' .. owner, 'n:' .. token)
end

-- The permits a queued or admitted entry asks for ("s3:LIVE:OWNER" -> 3); 0 for a lock's.
local function entry_permits(entry)
  return tonumber(string.match(entry, '^%a(%d+):') or '0')
end

-- The permits of a semaphore's admitted entries, not yet picked up.
local function pending_permits(k)
  local sum = 0
  for _, e in ipairs(redis.call('ZRANGE', k.p, 0, -1)) do sum = sum + entry_permits(e) end
  return sum
end

-- Removes the holders whose lease ran out (deadline <= now). An expiry, unlike a
-- release, blocks the lock for the holder's lock_delay. true if any expired.
local function expire_holders(k, now)
  local known = redis.call('HMGET', k.i, 'x', 'delay')
  local blocked_until = tonumber(known[2] or '0')
  local expired = false
  if known[1] then
    local _, deadline, lock_delay = parse_exclusive(known[1])
    if deadline <= now then
      blocked_until = math.max(blocked_until, deadline + lock_delay)
      redis.call('HDEL', k.i, 'x', 'v')  -- the leader's value goes with its grant
      expired = true
    end
  end
  local dead = redis.call('ZRANGEBYSCORE', k.h, '-inf', now, 'WITHSCORES')
  for n = 1, #dead, 2 do
    local token, deadline = dead[n], tonumber(dead[n + 1])
    local info = redis.call('HGET', k.i, 't:' .. token)
    if info then
      local lock_delay, owner = parse_shared(info)
      blocked_until = math.max(blocked_until, deadline + lock_delay)
      drop_shared(k, token, owner)
    else
      redis.call('ZREM', k.h, token)
    end
    expired = true
  end
  if blocked_until > now then
    redis.call('HSET', k.i, 'delay', fmt(blocked_until))
    extend(k.i, fmt(blocked_until - now + 1000))
  end
  return expired
end

-- Forgets waiters that stopped refreshing their liveness, and admitted waiters that
-- did not pick up their grant in time. true if any were removed.
local function evict_waiters(k, now)
  local dead = redis.call('ZRANGEBYSCORE', k.w, '-inf', now)
  for _, entry in ipairs(dead) do redis.call('LREM', k.q, 1, entry) end
  local removed = #dead
  if removed > 0 then redis.call('ZREMRANGEBYSCORE', k.w, '-inf', now) end
  return removed + redis.call('ZREMRANGEBYSCORE', k.p, '-inf', now) > 0
end

-- The first queued entry that is still alive; entries whose liveness is gone (their
-- keys expired separately) are dropped on the way.
local function live_head(k)
  while true do
    local head = redis.call('LINDEX', k.q, 0)
    if not head or redis.call('ZSCORE', k.w, head) then return head end
    redis.call('LPOP', k.q)
  end
end

local function exclusive_pending(k)
  local first = redis.call('ZRANGE', k.p, 0, 0)[1]
  return first ~= nil and string.sub(first, 1, 1) == 'x'
end

-- Could a request of `mode` (or for `permits` of a semaphore) be granted next to the
-- current holders and admitted waiters (ignoring the queue and the lock_delay)?
local function compatible(k, mode, permits)
  if permits > 0 then
    local known = redis.call('HMGET', k.i, 'cap', 'held')
    return tonumber(known[2] or '0') + pending_permits(k) + permits <= tonumber(known[1])
  end
  if redis.call('HEXISTS', k.i, 'x') == 1 then return false end
  if mode == 'x' then return redis.call('EXISTS', k.h, k.p) == 0 end
  return not exclusive_pending(k)
end

local function delay_over(k, now)
  return number_field(k, 'delay') <= now
end

-- Hands the lock to the head of the queue when it can have it: an exclusive head
-- alone, a shared head together with the whole run of shared entries behind it (a
-- semaphore's: the run of entries whose permits fit, up to the first that does not). The
-- admitted entries move to :p, where their owners pick the grant up on their next
-- call (a published message tells them at once). Returns the admitted entries.
local function admit(k, now)
  local admitted = {}
  if not delay_over(k, now) then return admitted end
  local head = live_head(k)
  if not head then return admitted end
  local mode = string.sub(head, 1, 1)
  if not compatible(k, mode, entry_permits(head)) then return admitted end
  repeat
    redis.call('LPOP', k.q)
    redis.call('ZREM', k.w, head)
    local live = entry_live(head)
    redis.call('ZADD', k.p, now + live, head)
    extend(k.p, fmt(live + 1000))
    extend(k.i, fmt(live + 1000))
    admitted[#admitted + 1] = head
    if mode == 'x' then break end
    head = live_head(k)
  until not head or string.sub(head, 1, 1) ~= 's' or
      (entry_permits(head) > 0 and not compatible(k, 's', entry_permits(head)))
  return admitted
end

-- A new grant; returns its token: one more than the last, and never less than the
-- Redis clock in microseconds, so tokens keep increasing after Redis lost its data.
-- `fresh`: the lock has no keys at all (the uncontended path), so there is no last
-- token to read and no expiry to keep. `permits` > 0: a shared grant of that many of
-- the semaphore's `capacity` permits. `value`: an exclusive grant's election value
-- ('' for none). No stale 'v' can be there to clear: every script that deletes 'x'
-- deletes 'v' in the same HDEL.
local function grant(k, now, now_us, mode, ttl, lock_delay, owner, fresh, permits, capacity,
                     value)
  local last, largest_delay = 0, 0
  if not fresh then
    local known = redis.call('HMGET', k.i, 'last', 'ld')
    last, largest_delay = tonumber(known[1] or '0'), tonumber(known[2] or '0')
  end
  local token = math.max(last + 1, now_us)
  local t = fmt(token)
  local fields = {'last', t}
  mark_caching(fields, owner)
  if lock_delay > largest_delay then
    fields[#fields + 1] = 'ld'
    fields[#fields + 1] = fmt(lock_delay)
  end
  if mode == 'x' then
    fields[#fields + 1] = 'x'
    fields[#fields + 1] = exclusive_value(t, now + ttl, lock_delay, owner)
    if value ~= '' then
      fields[#fields + 1] = 'v'
      fields[#fields + 1] = value
    end
  else
    redis.call('ZADD', k.h, now + ttl, t)
    for _, v in ipairs({'t:' .. t, fmt(lock_delay) .. ' ' .. owner, 'o:' .. owner, t}) do
      fields[#fields + 1] = v
    end
    if permits > 0 then
      for _, v in ipairs({'n:' .. t, fmt(permits), 'cap', fmt(capacity)}) do
        fields[#fields + 1] = v
      end
    end
  end
  redis.call('HSET', k.i, unpack(fields))
  if permits > 0 then redis.call('HINCRBY', k.i, 'held', permits) end
  local ms = fmt(ttl + lock_delay + 1000)
  if fresh then
    redis.call('PEXPIRE', k.i, ms)
    if mode == 's' then redis.call('PEXPIRE', k.h, ms) end
  else
    extend(k.i, ms)
    if mode == 's' then extend(k.h, ms) end
  end
  return token
end

-- The list the waiter of `entry` blocks on (lock_base.lua; LockKeys::wake_list).
local function wake_list(k, entry)
  return string.sub(k.i, 1, -2) .. 'k:' .. entry
end

-- Tells the admitted waiters to pick their grants up: a push to each one's wake list
-- (a waiter blocked on its own connection), and one message naming them all (a waiter
-- on the subscriber). Every waiter, fair or not, is in the queue and is served from
-- it, so nobody needs a message that names no one.
local function publish(k, channel, admitted)
  if #admitted == 0 then return end
  for _, entry in ipairs(admitted) do
    local list = wake_list(k, entry)
    redis.call('LPUSH', list, '1')
    redis.call('PEXPIRE', list, fmt(entry_live(entry) + 1000))
  end
  redis.call('SPUBLISH', channel, table.concat(admitted, ' '))
end

-- Tells an election's observers (Election::observe) that its leader changed: a grant,
-- release or proclaim of a leader with a value. The message names no waiter ('~' is
-- no entry), so waiters ignore it. A lease that runs out publishes nothing (no script
-- runs then); observers also poll.
local function announce(channel)
  redis.call('SPUBLISH', channel, '~')
end

-- Asks the holders that cache their grants (lock_base.lua, caches) to give them back:
-- a request was refused while they hold. One message for all of them. A lock that never
-- had such a holder (no field c) is not searched.
local function ask_cached_back(k, channel)
  if redis.call('HEXISTS', k.i, 'c') == 0 then return end
  local exclusive = redis.call('HGET', k.i, 'x')
  if exclusive then
    local _, _, _, owner = parse_exclusive(exclusive)
    if caches(owner) then redis.call('SPUBLISH', channel, '?') end
    return
  end
  for _, t in ipairs(redis.call('ZRANGE', k.h, 0, -1)) do
    local info = redis.call('HGET', k.i, 't:' .. t)
    if info then
      local _, owner = parse_shared(info)
      if caches(owner) then
        redis.call('SPUBLISH', channel, '?')
        return
      end
    end
  end
end

-- Deletes the lock's keys once nothing is left in them: no holder, waiter or
-- admission, no lock_delay running. (Until then every write that adds to a key also
-- extends its expiry past what it added, so a lock whose clients all vanished leaves
-- nothing behind either.)
local function housekeep(k, now)
  local known = redis.call('HMGET', k.i, 'x', 'delay')
  if not known[1] and tonumber(known[2] or '0') <= now and
      redis.call('EXISTS', k.h, k.w, k.p) == 0 then
    redis.call('DEL', k.i, k.q)
  end
end

-- After a change: admit whom the queue allows, tell the waiters. `except` (may be
-- nil) is an admitted entry that is being granted in this call and needs no message.
-- Returns the admitted entries.
local function settle(k, now, channel, except)
  local admitted = admit(k, now)
  local others = {}
  for _, entry in ipairs(admitted) do
    if entry ~= except then others[#others + 1] = entry end
  end
  publish(k, channel, others)
  return admitted
end

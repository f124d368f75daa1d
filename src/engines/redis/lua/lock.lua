-- lock.lua — the shared part of every redis:// script, put in front of each at build
-- time (EVAL scripts cannot include one another). docs/engines/redis.md describes the
-- data model; in short, a lock's keys all share the hash tag {warden:GROUP/NAME}:
--
--   :i  hash         last     the last token handed out
--                    x        the exclusive holder, if one holds:
--                             "TOKEN DEADLINE_MS LOCK_DELAY_MS OWNER"
--                    t:TOKEN  "LOCK_DELAY_MS OWNER" of a shared holder
--                    o:OWNER  the token a shared holder OWNER holds
--                    delay    no grant before this time (ms): a lock_delay at work
--                    ld       the largest lock_delay of the holders (key expiry)
--   :h  sorted set   shared holder token -> lease deadline (ms)
--   :q  list         the FIFO queue of fair waiters, as entries "MODE:LIVE_MS:OWNER"
--   :w  sorted set   entry -> liveness deadline of every waiter (fair or not)
--   :p  sorted set   entry -> pick-up deadline of admitted waiters (pending grants)
--
-- The exclusive holder lives in the hash alone, so the uncontended exclusive lock is
-- one key: created by acquire, deleted by release (four calls each).
-- Every time is Redis' own (TIME): client clocks never enter a decision.
-- Numbers are written with fmt(): Lua's tostring() rounds to 14 digits.

local function fmt(n)
  return string.format('%.0f', n)
end

-- Now in milliseconds (deadlines) and in microseconds (the token floor).
local function clock()
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  return math.floor(us / 1000), us
end

-- The five keys of the lock whose holders key is KEYS[first].
local function lock_keys(first)
  return {h = KEYS[first], i = KEYS[first + 1], q = KEYS[first + 2],
          w = KEYS[first + 3], p = KEYS[first + 4]}
end

local function number_field(k, field)
  return tonumber(redis.call('HGET', k.i, field) or '0')
end

-- The exclusive holder's field: "TOKEN DEADLINE LOCK_DELAY OWNER".
local function exclusive_value(t, deadline, lock_delay, owner)
  return t .. ' ' .. fmt(deadline) .. ' ' .. fmt(lock_delay) .. ' ' .. owner
end

-- -> token (text), deadline, lock_delay, owner
local function parse_exclusive(value)
  local t, deadline, lock_delay, owner = string.match(value, '^(%d+) (%d+) (%d+) (.*)$')
  return t, tonumber(deadline), tonumber(lock_delay), owner
end

-- A shared holder's info "LOCK_DELAY OWNER" -> lock_delay, owner
local function parse_shared(info)
  local lock_delay, owner = string.match(info, '^(%d+) (.*)$')
  return tonumber(lock_delay), owner
end

local function drop_shared(k, token, owner)
  redis.call('ZREM', k.h, token)
  redis.call('HDEL', k.i, 't:' .. token, 'o:' .. owner)
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
      redis.call('HDEL', k.i, 'x')
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
  if blocked_until > now then redis.call('HSET', k.i, 'delay', fmt(blocked_until)) end
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

-- Could a request of `mode` be granted next to the current holders and admitted
-- waiters (ignoring the queue and the lock_delay)?
local function compatible(k, mode)
  if redis.call('HEXISTS', k.i, 'x') == 1 then return false end
  if mode == 'x' then return redis.call('EXISTS', k.h, k.p) == 0 end
  return not exclusive_pending(k)
end

local function delay_over(k, now)
  return number_field(k, 'delay') <= now
end

-- Hands the lock to the head of the queue when it can have it: an exclusive head
-- alone, a shared head together with the whole run of shared entries behind it. The
-- admitted entries move to :p, where their owners pick the grant up on their next
-- call (a published message tells them at once). Returns the admitted entries.
local function admit(k, now)
  local admitted = {}
  if not delay_over(k, now) then return admitted end
  local head = live_head(k)
  if not head then return admitted end
  local mode = string.sub(head, 1, 1)
  if not compatible(k, mode) then return admitted end
  repeat
    redis.call('LPOP', k.q)
    redis.call('ZREM', k.w, head)
    local live = tonumber(string.match(head, '^%a:(%d+):'))
    redis.call('ZADD', k.p, now + live, head)
    admitted[#admitted + 1] = head
    if mode == 'x' then break end
    head = live_head(k)
  until not head or string.sub(head, 1, 1) ~= 's'
  return admitted
end

-- Makes `key` live at least `ms` more milliseconds: GT never shortens a key's life,
-- and NX gives one that has no expiry yet (just created) its first.
local function extend(key, ms)
  if redis.call('PEXPIRE', key, ms, 'GT') == 0 then redis.call('PEXPIRE', key, ms, 'NX') end
end

-- A new grant; returns its token: one more than the last, and never less than the
-- Redis clock in microseconds, so tokens keep increasing after Redis lost its data.
-- `fresh`: the lock has no keys at all (the uncontended path), so there is no last
-- token to read and no expiry to keep.
local function grant(k, now, now_us, mode, ttl, lock_delay, owner, fresh)
  local last, largest_delay = 0, 0
  if not fresh then
    local known = redis.call('HMGET', k.i, 'last', 'ld')
    last, largest_delay = tonumber(known[1] or '0'), tonumber(known[2] or '0')
  end
  local token = math.max(last + 1, now_us)
  local t = fmt(token)
  local fields = {'last', t}
  if lock_delay > largest_delay then
    fields[#fields + 1] = 'ld'
    fields[#fields + 1] = fmt(lock_delay)
  end
  if mode == 'x' then
    fields[#fields + 1] = 'x'
    fields[#fields + 1] = exclusive_value(t, now + ttl, lock_delay, owner)
  else
    redis.call('ZADD', k.h, now + ttl, t)
    for _, v in ipairs({'t:' .. t, fmt(lock_delay) .. ' ' .. owner, 'o:' .. owner, t}) do
      fields[#fields + 1] = v
    end
  end
  redis.call('HSET', k.i, unpack(fields))
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

-- Tells waiters to look: the admitted ones by name; non-fair waiters listen to every
-- message. Sent when someone was admitted, or when the lock became freer while
-- anyone waits.
local function publish(k, channel, admitted, freed)
  if #admitted > 0 or (freed and redis.call('EXISTS', k.w) == 1) then
    redis.call('PUBLISH', channel, table.concat(admitted, ' '))
  end
end

local function top_score(key)
  local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if top[2] then return tonumber(top[2]) end
  return 0
end

-- Deletes the lock's keys when nothing is left in them, otherwise sets them all to
-- expire a little after the last thing in them could matter (a lease plus its
-- lock_delay, a waiter's liveness, a pick-up deadline, a running lock_delay): a lock
-- whose clients all vanished leaves nothing behind.
local function housekeep(k, now)
  local known = redis.call('HMGET', k.i, 'delay', 'ld', 'x')
  local horizon = tonumber(known[1] or '0')
  local largest_delay = tonumber(known[2] or '0')
  if known[3] then
    local _, deadline = parse_exclusive(known[3])
    horizon = math.max(horizon, deadline + largest_delay)
  end
  local held = top_score(k.h)
  if held > 0 then horizon = math.max(horizon, held + largest_delay) end
  horizon = math.max(horizon, top_score(k.w), top_score(k.p))
  if horizon <= now then
    redis.call('DEL', k.h, k.i, k.q, k.w, k.p)
    return
  end
  local ms = fmt(horizon - now + 1000)
  for _, key in ipairs({k.h, k.i, k.q, k.w, k.p}) do redis.call('PEXPIRE', key, ms) end
end

-- After a change: admit whom the queue allows, tell the waiters. `except` (may be
-- nil) is an admitted entry that is being granted in this call and needs no message.
-- Returns the admitted entries.
local function settle(k, now, channel, freed, except)
  local admitted = admit(k, now)
  local others = {}
  for _, entry in ipairs(admitted) do
    if entry ~= except then others[#others + 1] = entry end
  end
  publish(k, channel, others, freed)
  return admitted
end

-- lock_base.lua — what every redis:// script needs first: the data model, clocks, key
-- names and the exclusive holder's record. Scripts include it with a line "--! lock_base.lua"
-- (build time: EVAL scripts cannot include one another). docs/engines/redis.md describes the
-- data model; in short, a lock's keys all share the hash tag {warden:GROUP/NAME}:
--
--   :i  hash         last     the last token handed out
--                    x        the exclusive holder, if one holds:
--                             "TOKEN DEADLINE_MS LOCK_DELAY_MS OWNER"
--                    v        an election's leader's value (any bytes), when the x
--                             holder has a non-empty one; written and deleted with x
--                    t:TOKEN  "LOCK_DELAY_MS OWNER" of a shared holder
--                    o:OWNER  the token a shared holder OWNER holds
--                    delay    no grant before this time (ms): a lock_delay at work
--                    ld       the largest lock_delay of the holders (key expiry)
--                    c        "1" once a holder that caches its grant was granted here
--                             (see caches below); gone with the hash
--   :h  sorted set   shared holder token -> lease deadline (ms)
--   :q  list         the FIFO queue of waiters, fair or not, as entries
--                    "MODE:LIVE_MS:OWNER"
--   :w  sorted set   entry -> liveness deadline of every queued waiter
--   :p  sorted set   entry -> pick-up deadline of admitted waiters (pending grants)
--   :k:ENTRY  list   pushed to when ENTRY is admitted: its waiter blocks on it with
--                    BLPOP (wait_lines.h); gone when popped, picked up or withdrawn,
--                    and expires with the pick-up deadline otherwise
--
-- The string form: while an exclusive holder without a lock_delay is all there is in a
-- lock, :i is instead a plain string "TOKEN OWNER" that expires with the lease. It is the
-- uncontended path, as close as a lock with a token gets to a raw SET NX PX: acquire
-- makes it with TIME and SET NX PX, release checks and deletes it with TYPE, GET and DEL;
-- renew and check read it as it is. The first script that needs more than that one
-- holder (a waiter, a shared request, a withdrawal) turns it into the hash it stands for
-- (as_hash below), so the shared part (lock.lua) only ever sees the hash. An exclusive
-- holder with a lock_delay lives in the hash alone: one key, four calls to make and four
-- to delete. A candidate with a value (an election's campaign) skips the string form,
-- which has no room for it: its grant is the hash form's x and v, written together.
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

-- The liveness a queue entry was given, in ms ("s3:LIVE:OWNER" -> LIVE).
local function entry_live(entry)
  return tonumber(string.match(entry, '^%a%d*:(%d+):'))
end

-- The five keys of the lock whose holders key is KEYS[first].
local function lock_keys(first)
  return {h = KEYS[first], i = KEYS[first + 1], q = KEYS[first + 2],
          w = KEYS[first + 3], p = KEYS[first + 4]}
end

-- Makes `key` live at least `ms` more milliseconds: GT never shortens a key's life,
-- and NX gives one that has no expiry yet (just created) its first.
local function extend(key, ms)
  if redis.call('PEXPIRE', key, ms, 'GT') == 0 then redis.call('PEXPIRE', key, ms, 'NX') end
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

-- A holder whose client keeps the grant cached after its release (LockOptions::cache)
-- has an owner ending in '*'. A request such a holder stands in the way of publishes
-- '?' on the lock's channel; the holder's client watches for it and gives the grant
-- back (a revoke, core/watch_revokes.h). Nobody else ever hears a '?'. The hash form
-- marks a lock that has had such a holder with the field c, so a lock whose holders
-- never cache (a semaphore's, say) is not searched for one on every refusal.
local function caches(owner)
  return string.sub(owner, -1) == '*'
end

-- Adds to a grant's HSET `fields` the mark 'c' (see the data model) when `owner` caches
-- its grant.
local function mark_caching(fields, owner)
  if caches(owner) then
    fields[#fields + 1] = 'c'
    fields[#fields + 1] = '1'
  end
end

-- If :i is the string form (see above), rewrites it as the hash it stands for: the same
-- holder, its lease ending when the string would have expired, no lock_delay. A hash or
-- no key is left as it is. (TYPE, not a GET that may fail: Redis counts every WRONGTYPE
-- in its error statistics, even one a script catches.)
local function as_hash(k, now)
  if redis.call('TYPE', k.i).ok ~= 'string' then return end
  local t, owner = string.match(redis.call('GET', k.i), '^(%d+) (.*)$')
  local ms = redis.call('PTTL', k.i)
  redis.call('DEL', k.i)
  local fields = {'last', t, 'x', exclusive_value(t, now + ms, 0, owner)}
  mark_caching(fields, owner)
  redis.call('HSET', k.i, unpack(fields))
  redis.call('PEXPIRE', k.i, fmt(ms + 1000))
end

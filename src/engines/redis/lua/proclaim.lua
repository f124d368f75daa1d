-- proclaim.lua — replaces the value of an election's leader: the exclusive grant with
-- this token and owner, its lease running (as renew.lua decides "held").
-- KEYS: i of the lock
-- ARGV: token, owner, value (any bytes; "" for none), channel (told of the change, as
--       lock.lua's announce() does)
-- Returns 1 if the grant is held and now carries `value`, 0 if not held (released, run
-- out, deleted behind our back, or never this owner's): then nothing is written, so a
-- lock whose keys are gone stays gone.
--! lock_base.lua
local token, owner, value, channel = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local k = {i = KEYS[1]}
local now = clock()

local form = redis.call('TYPE', k.i).ok
if form == 'string' then
  -- The string form (lock_base.lua): a holder whose value is empty, its expiry its lease.
  if redis.call('GET', k.i) ~= token .. ' ' .. owner then return 0 end
  if value == '' then return 1 end
  -- It has no room for a value: the hash it stands for does.
  as_hash(k, now)
elseif form ~= 'hash' then
  return 0
end

local exclusive = redis.call('HGET', k.i, 'x')
if not exclusive then return 0 end
local t, deadline, _, holder = parse_exclusive(exclusive)
if t ~= token or holder ~= owner or deadline <= now then return 0 end
if value == '' then
  redis.call('HDEL', k.i, 'v')
else
  redis.call('HSET', k.i, 'v', value)
end
redis.call('SPUBLISH', channel, '~')
return 1

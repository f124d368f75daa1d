-- check.lua — is the grant with this token held in this mode (its lease running)?
-- A sequencer names its mode: an exclusive grant's token presented as shared, or the
-- other way round, names no grant and does not check.
-- KEYS: h i of the lock
-- ARGV: token, mode ("x" | "s")
-- Returns 1 or 0.
--! lock_base.lua
local now = clock()
local token, mode = ARGV[1], ARGV[2]
if redis.call('TYPE', KEYS[2]).ok == 'string' then
  -- The string form (lock_base.lua): an exclusive holder whose lease is its expiry.
  if mode == 'x' and string.match(redis.call('GET', KEYS[2]), '^(%d+) ') == token then
    return 1
  end
  return 0
end
if mode == 'x' then
  local exclusive = redis.call('HGET', KEYS[2], 'x')
  if not exclusive then return 0 end
  local t, deadline = parse_exclusive(exclusive)
  if t == token and deadline > now then return 1 end
  return 0
end
-- Shared holders live in :h alone; an exclusive holder never does.
local deadline = redis.call('ZSCORE', KEYS[1], token)
if deadline and tonumber(deadline) > now then return 1 end
return 0

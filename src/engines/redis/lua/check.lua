-- check.lua — is the grant with this token still held (its lease running)?
-- KEYS: h i of the lock
-- ARGV: token
-- Returns 1 or 0.
--! lock_base.lua
local now = clock()
local exclusive = redis.call('HGET', KEYS[2], 'x')
if exclusive then
  local t, deadline = parse_exclusive(exclusive)
  if t == ARGV[1] then
    if deadline > now then return 1 end
    return 0
  end
end
local deadline = redis.call('ZSCORE', KEYS[1], ARGV[1])
if deadline and tonumber(deadline) > now then return 1 end
return 0

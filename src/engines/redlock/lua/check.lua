-- check.lua — does this master hold the lock for the grant with this token?
-- KEYS: rl
-- ARGV: token
-- Returns 1 or 0.
--! owner.lua
local value = redis.call('GET', KEYS[1])
if value and string.match(value, ':(%d+)$') == ARGV[1] then return 1 end
return 0

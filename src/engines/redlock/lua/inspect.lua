-- inspect.lua — one master's view of a lock for `warden status`: the grant's value and
-- the milliseconds its key has left. Reads only.
-- KEYS: rl
-- Returns {VALUE, PTTL}, or {'', -2} when the key is absent.
--! owner.lua
local value = redis.call('GET', KEYS[1])
if not value then return {'', -2} end
return {value, redis.call('PTTL', KEYS[1])}

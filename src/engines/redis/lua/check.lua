-- check.lua — is the grant with this token still held (its lease running)?
-- KEYS: h of the lock
-- ARGV: token
-- Returns 1 or 0.
local now = clock()
local deadline = redis.call('ZSCORE', KEYS[1], ARGV[1])
if deadline and tonumber(deadline) > now then return 1 end
return 0

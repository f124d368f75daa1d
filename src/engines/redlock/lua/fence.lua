-- fence.lua — one master's part of fixing an acquire's token: while the owner still
-- holds the lock here, raise the lock's last token to TOKEN and mark the lock value with
-- it (so check.lua can find it). The lease's expiry is kept; the counter lives at least
-- the lease's TTL from now (never less than it had).
-- KEYS: rl rf
-- ARGV: owner token ttl_ms
-- Returns 1 (written) or 0 (the owner's key is gone here).
--! owner.lua
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local last = redis.call('GET', KEYS[2])
if not last or greater(ARGV[2], last) then redis.call('SET', KEYS[2], ARGV[2], 'KEEPTTL') end
extend(KEYS[2], ARGV[3])
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. ARGV[2], 'KEEPTTL')
return 1

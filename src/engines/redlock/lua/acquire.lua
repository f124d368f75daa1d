-- acquire.lua — one master's vote in an acquire: SET NX PX of the owner's value and, if
-- it was set, this master's part of the token read: the lock's last token and the
-- master's clock in microseconds (a floor that keeps tokens rising if :rf was lost).
-- An attempt already withdrawn here (its withdrawal overtook this vote, which travelled
-- on another connection) is refused.
-- KEYS: rl rf rx:OWNER
-- ARGV: owner ttl_ms
-- Returns {0} (held by someone else, or withdrawn), or {1, LAST_TOKEN, SECONDS,
-- MICROSECONDS} as text.
--! owner.lua
if redis.call('EXISTS', KEYS[3]) == 1 then return {0} end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return {0} end
local t = redis.call('TIME')
return {1, redis.call('GET', KEYS[2]) or '0', t[1], t[2]}

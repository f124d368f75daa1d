-- acquire_alone.lua — a whole acquire on the only master (redis://…?layout=simple, or
-- redlock:// with one master): acquire.lua's vote and fence.lua's token in one step,
-- since the quorum's largest read is this master's own. The token is one more than the
-- larger of the lock's last token and the master's clock in microseconds, as next_token
-- makes it from a quorum's reads.
-- KEYS: rl rf rx:OWNER
-- ARGV: owner ttl_ms
-- Returns {0} (held by someone else, or withdrawn), or {1, TOKEN} as text.
--! owner.lua
if redis.call('EXISTS', KEYS[3]) == 1 then return {0} end
if redis.call('EXISTS', KEYS[1]) == 1 then return {0} end
local t = redis.call('TIME')
-- The clock as decimal microseconds, in text: Lua's numbers are doubles.
local top = t[1] .. string.format('%06d', tonumber(t[2]))
local last = redis.call('GET', KEYS[2])
if last and greater(last, top) then top = last end
-- top + 1 in decimal text.
local i = #top
while i > 0 and string.sub(top, i, i) == '9' do i = i - 1 end
local token
if i == 0 then
  token = '1' .. string.rep('0', #top)
else
  token = string.sub(top, 1, i - 1) .. string.char(string.byte(top, i) + 1) ..
          string.rep('0', #top - i)
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. token, 'PX', ARGV[2])
redis.call('SET', KEYS[2], token, 'KEEPTTL')
extend(KEYS[2], ARGV[2])
return {1, token}

-- scan.lua — one page of SCAN over the keys that match a pattern, for `warden status`.
-- Reads only.
-- ARGV: cursor pattern count
-- Returns {NEXT_CURSOR, KEY...}; NEXT_CURSOR "0" ends the scan.
--! owner.lua
local page = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2], 'COUNT', ARGV[3])
local out = {page[1]}
for _, key in ipairs(page[2]) do out[#out + 1] = key end
return out

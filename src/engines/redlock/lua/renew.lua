-- renew.lua — compare-and-extend a batch of leases on this master (the watchdog's
-- round): each lock whose key its owner still holds here lives TTL more from now.
-- A key that expired is never brought back.
-- KEYS: rl1 rl2 ...
-- ARGV: owner1 ttl1 owner2 ttl2 ...
-- Returns one 1 (extended) or 0 (not the owner's here) per key, in order.
--! owner.lua
local result = {}
for n = 1, #KEYS do
  result[n] = 0
  if is_ours(redis.call('GET', KEYS[n]), ARGV[2 * n - 1]) then
    redis.call('PEXPIRE', KEYS[n], ARGV[2 * n])
    result[n] = 1
  end
end
return result

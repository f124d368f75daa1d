-- renew.lua — compare-and-extend a batch of leases on this master (the watchdog's
-- round): each lock whose key its owner still holds here lives TTL more from now, and
-- so does its fence counter (at least: it is never shortened).
-- A key that expired is never brought back.
-- KEYS: rl1 rf1 rl2 rf2 ...
-- ARGV: owner1 ttl1 owner2 ttl2 ...
-- Returns one 1 (extended) or 0 (not the owner's here) per lease, in order.
--! owner.lua
local result = {}
for n = 1, #KEYS / 2 do
  result[n] = 0
  local owner, ttl = ARGV[2 * n - 1], ARGV[2 * n]
  if is_ours(redis.call('GET', KEYS[2 * n - 1]), owner) then
    redis.call('PEXPIRE', KEYS[2 * n - 1], ttl)
    extend(KEYS[2 * n], ttl)
    result[n] = 1
  end
end
return result

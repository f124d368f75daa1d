-- release.lua — compare-and-delete: deletes the lock here if the owner holds it.
-- KEYS: rl
-- ARGV: owner
-- Returns 1 (deleted) or 0 (not the owner's: never set here, expired, or another's).
--! owner.lua
if is_ours(redis.call('GET', KEYS[1]), ARGV[1]) then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0

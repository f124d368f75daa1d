-- withdraw.lua — takes back a failed attempt's vote on this master: deletes the lock if
-- the attempt's owner holds it here; otherwise leaves a marker (for as long as the vote
-- could have set the key) so that the vote, if it is still on its way — it travelled on
-- another connection, which nothing orders against this one — is refused when it comes.
-- KEYS: rl rx:OWNER
-- ARGV: owner ttl_ms
-- Returns 1 (deleted) or 0 (not set here; marked).
--! owner.lua
if is_ours(redis.call('GET', KEYS[1]), ARGV[1]) then
  redis.call('DEL', KEYS[1])
  return 1
end
redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
return 0

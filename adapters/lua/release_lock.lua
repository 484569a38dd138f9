--[[ release_lock: delete a lock only if this caller still holds it.

KEYS[1]  lock key (SET NX PX by the holder)
ARGV[1]  the holder's token

Returns 1 released, 0 not ours any more (it expired, maybe taken by another)
No loops.
]]
local lock = KEYS[1]
local token = ARGV[1]

if redis.call('GET', lock) == token then
  return redis.call('DEL', lock)
end
return 0

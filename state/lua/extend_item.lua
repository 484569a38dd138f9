-- extend_item: a map item's heartbeat (includes/map_items). Extends the item's lease and
-- resets the idle time of its ready entry, so recovery never takes it from a live executor.
--
-- KEYS[1]  saga hash
-- KEYS[2]  ready stream of the map step
-- ARGV[1]  fencing token of the attempt
-- ARGV[2]  lease duration (ms)
-- ARGV[3]  consumer group
-- ARGV[4]  consumer (worker) name
-- ARGV[5]  ready entry id
-- ARGV[6]  map step name
-- ARGV[7]  item index
-- Returns: {RC.OK, lease_until_ms}
--          {RC.NOT_FOUND}
--          {RC.LEASE_LOST, state}   the token is stale: stop the attempt
-- Emits:   nothing
--@include now
--@include map_items

local saga, m, i = KEYS[1], ARGV[6], ARGV[7]
local s = redis.call('HMGET', saga, 'state', 'step', 'epoch', item_f('mi', m, i),
                     item_f('mt', m, i))
if not s[1] then return {RC.NOT_FOUND} end
if s[1] ~= STATE.RUNNING or s[2] ~= m or item_state(s[4], s[3]) ~= 'r' or s[5] ~= ARGV[1] then
  return {RC.LEASE_LOST, s[1]}
end
local lease_until = string.format('%d', now_ms() + tonumber(ARGV[2]))
redis.call('HSET', saga, item_f('ml', m, i), lease_until)
redis.call('XCLAIM', KEYS[2], ARGV[3], ARGV[4], 0, ARGV[5], 'JUSTID')
return {RC.OK, tonumber(lease_until)}

-- extend_lease: a heartbeat. Extends the lease of a running attempt and resets
-- the idle time of its ready entry, so recovery (XAUTOCLAIM past the lease)
-- never takes work from an executor that is alive.
--
-- KEYS[1]  saga hash
-- KEYS[2]  ready stream of the step
-- KEYS[3]  users' slots of the step  {p}:inflight:<step>  (see includes/user_cap)
-- ARGV[1]  fencing token of the attempt
-- ARGV[2]  lease duration (ms)
-- ARGV[3]  consumer group
-- ARGV[4]  consumer (worker) name
-- ARGV[5]  ready entry id
-- ARGV[6]  operation id
-- ARGV[7]  the attempt's slot '<user>|<record>' when the step has a per-user cap ("" =
--          none): its deadline follows the lease, so a long step keeps its slot
-- ARGV[8]  the attempt's step ("" = not said): a lane's lease is its own (includes/lanes)
-- Returns: {RC.OK, lease_until_ms}
--          {RC.DUPLICATE, lease_until_ms}  same op id seen: nothing written
--          {RC.NOT_FOUND}
--          {RC.LEASE_LOST, state}         the token is stale: stop the step
-- Emits:   nothing (heartbeats are not history events: they would flood it)
--@include now
--@include op
--@include lanes

local saga, ready = KEYS[1], KEYS[2]
local token, op = ARGV[1], ARGV[6]

local replay = op_replay(saga, op)
if replay then return replay end
local lane_step = ARGV[8] or ''
local s = redis.call('HMGET', saga, 'state', 'token', 'sect', 'epoch', 'lt@' .. lane_step)
if not s[1] then return {RC.NOT_FOUND} end
-- A lane's attempt (includes/lanes) holds its lease in the lane's fields.
local lane = lane_step ~= '' and s[5] == token and lane_live(s[1], s[3], s[4])
-- An undo attempt holds its lease in a 'compensating' saga.
if not lane and ((s[1] ~= STATE.RUNNING and s[1] ~= STATE.COMPENSATING) or s[2] ~= token) then
  return {RC.LEASE_LOST, s[1]}
end

local lease_until = now_ms() + tonumber(ARGV[2])
if lane then
  redis.call('HSET', saga, 'll@' .. lane_step, lease_until)
else
  redis.call('HSET', saga, 'lease', lease_until)
end
redis.call('XCLAIM', ready, ARGV[3], ARGV[4], 0, ARGV[5], 'JUSTID')
if ARGV[7] and ARGV[7] ~= '' then redis.call('ZADD', KEYS[3], 'XX', lease_until, ARGV[7]) end
return op_record(saga, op, {RC.OK, lease_until})

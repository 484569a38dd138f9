-- resume_schedule: a paused schedule ticks again from its next cron time after now
-- (ARGV[2], computed by the caller): the ticks missed while paused are not fired.
--
-- KEYS[1]  definitions (hash)      <prefix>:{schedules}:defs
-- KEYS[2]  next fire times (zset)  <prefix>:{schedules}:due
-- ARGV[1]  name
-- ARGV[2]  next fire time (ms)
-- Returns: {RC.OK, next_ms}          resumed
--          {RC.DUPLICATE, next_ms}   active already: its next fire time is kept
--          {RC.NOT_FOUND}            no such schedule
-- Emits:   nothing

local defs, due, name = KEYS[1], KEYS[2], ARGV[1]
if redis.call('HEXISTS', defs, name) == 0 then return {RC.NOT_FOUND} end
local score = redis.call('ZSCORE', due, name)
if score then return {RC.DUPLICATE, tonumber(score)} end
redis.call('ZADD', due, ARGV[2], name)
return {RC.OK, tonumber(ARGV[2])}

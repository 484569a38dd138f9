-- pause_schedule: stop a schedule's ticks (its next fire time is dropped).
--
-- KEYS[1]  definitions (hash)      <prefix>:{schedules}:defs
-- KEYS[2]  next fire times (zset)  <prefix>:{schedules}:due
-- ARGV[1]  name
-- Returns: {RC.OK}          paused
--          {RC.DUPLICATE}   paused already
--          {RC.NOT_FOUND}   no such schedule
-- Emits:   nothing

local defs, due, name = KEYS[1], KEYS[2], ARGV[1]
if redis.call('HEXISTS', defs, name) == 0 then return {RC.NOT_FOUND} end
if redis.call('ZREM', due, name) == 0 then return {RC.DUPLICATE} end
return {RC.OK}

-- add_schedule: store a schedule's definition and its first fire time.
-- A schedule is its definition (KEYS[1] field <name>, JSON: cron, type, user, input)
-- and, while active, its next fire time (KEYS[2] member <name>, score ms); paused is
-- "not in KEYS[2]". Adding a name that exists is refused unless ARGV[4] says replace,
-- which keeps its pause and its next fire time when the cron did not change.
--
-- KEYS[1]  definitions (hash: name -> JSON)        <prefix>:{schedules}:defs
-- KEYS[2]  next fire times (zset: name -> ms)      <prefix>:{schedules}:due
-- ARGV[1]  name
-- ARGV[2]  definition (JSON)
-- ARGV[3]  first fire time (ms since the epoch, UTC)
-- ARGV[4]  "1": replace an existing definition (the App's schedules at every start)
-- ARGV[5]  "1": the cron or the type changed (replace: the next fire time is ARGV[3])
-- Returns: {RC.OK, next_ms}          added (or replaced); next_ms -1: paused
--          {RC.DUPLICATE, next_ms}   the same definition is stored: nothing changed
--          {RC.CONFLICT}             another definition has the name and ARGV[4] is not 1
-- Emits:   nothing

local defs, due, name = KEYS[1], KEYS[2], ARGV[1]
local old = redis.call('HGET', defs, name)
local score = redis.call('ZSCORE', due, name)
local shown = score and tonumber(score) or -1
if old == ARGV[2] then return {RC.DUPLICATE, shown} end
if old and ARGV[4] ~= '1' then return {RC.CONFLICT} end
redis.call('HSET', defs, name, ARGV[2])
if not old or (score and ARGV[5] == '1') then
  redis.call('ZADD', due, ARGV[3], name)
  return {RC.OK, tonumber(ARGV[3])}
end
return {RC.OK, shown}

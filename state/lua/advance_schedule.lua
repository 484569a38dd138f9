-- advance_schedule: after the saga of a tick was started (start_saga, idempotent by the
-- record id derived from the schedule's name and the tick), move the schedule to its
-- next fire time. Fenced by the tick: only the fire of the tick stored as next moves it,
-- so a second controller's fire of the same tick, a resent call, or a fire racing a
-- pause, resume or replace changes nothing. A fire killed between the start and this
-- call is redone from the start: the start then finds the saga (DUPLICATE), and this
-- moves the schedule once.
--
-- KEYS[1]  next fire times (zset)  <prefix>:{schedules}:due
-- KEYS[2]  last fires (hash: name -> "<tick ms>|<record id>")  <prefix>:{schedules}:last
-- ARGV[1]  name
-- ARGV[2]  the tick fired (ms): must be the stored next fire time
-- ARGV[3]  the next fire time (ms, > ARGV[2])
-- ARGV[4]  the record id started for the tick
-- Returns: {RC.OK, next_ms}       advanced
--          {RC.STALE_ENTRY, now}   the stored next fire time is another (now: it, or -1
--                                  when paused or removed): nothing changed
-- Emits:   nothing

local due, last, name = KEYS[1], KEYS[2], ARGV[1]
local score = redis.call('ZSCORE', due, name)
if not score or tonumber(score) ~= tonumber(ARGV[2]) then
  return {RC.STALE_ENTRY, score and tonumber(score) or -1}
end
redis.call('ZADD', due, ARGV[3], name)
redis.call('HSET', last, name, ARGV[2] .. '|' .. ARGV[4])
return {RC.OK, tonumber(ARGV[3])}

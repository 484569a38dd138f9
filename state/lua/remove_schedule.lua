-- remove_schedule: delete a schedule (the sagas it started stay).
--
-- KEYS[1]  definitions (hash)      <prefix>:{schedules}:defs
-- KEYS[2]  next fire times (zset)  <prefix>:{schedules}:due
-- KEYS[3]  last fires (hash: name -> "<tick ms>|<record id>")  <prefix>:{schedules}:last
-- ARGV[1]  name
-- Returns: {RC.OK}          removed
--          {RC.NOT_FOUND}   no such schedule
-- Emits:   nothing

local name = ARGV[1]
if redis.call('HDEL', KEYS[1], name) == 0 then return {RC.NOT_FOUND} end
redis.call('ZREM', KEYS[2], name)
redis.call('HDEL', KEYS[3], name)
return {RC.OK}

-- release_record: a terminal saga leaves its old partition once receive_record put it
-- in its new one (saga partitions migrate): its keys, index entries and dead letter go.
-- Refused if the saga changed since it was copied (it is then copied again).
--
-- KEYS[1]  saga hash                 {p}:saga:<record>
-- KEYS[2]  history stream            {p}:hist:<record>
-- KEYS[3]  pages blob                {p}:pages:<record>
-- KEYS[4]  created index (zset)      {p}:idx:created
-- KEYS[5]  user index (zset)         {p}:idx:user:<user>
-- KEYS[6]  retired sagas (zset)      {p}:retired
-- KEYS[7]  review index (zset)       {p}:idx:review
-- KEYS[8..13] state indexes, in SagaState order
-- KEYS[14] dead letters of its step  {p}:dead:<step>
-- KEYS[15..14+n]  its cached LLM answers
-- ARGV[1]  operation id (the migration's)
-- ARGV[2]  record id
-- ARGV[3]  the saga's 'updated' field when it was copied
-- ARGV[4]  retired member ('' = none)
-- ARGV[5]  dead letter id ('' = none)
-- ARGV[6]  n (<= 64)
-- Returns: {RC.OK}           released
--          {RC.DUPLICATE}    already gone (a re-sent call)
--          {RC.WRONG_STATE}  no longer terminal, or changed since copied: nothing written
-- Emits:   nothing
local saga, record = KEYS[1], ARGV[2]

local s = redis.call('HMGET', saga, 'state', 'updated')
if not s[1] then return {RC.DUPLICATE} end
local terminal = s[1] == STATE.COMPLETED or s[1] == STATE.FAILED or s[1] == STATE.CANCELLED
                 or s[1] == STATE.COMPENSATED or s[1] == STATE.COMPENSATION_FAILED
if not terminal or s[2] ~= ARGV[3] then return {RC.WRONG_STATE} end
local n = tonumber(ARGV[6])
if n > 64 then return redis.error_reply('release_record: at most 64 answers per record') end

redis.call('DEL', saga, KEYS[2], KEYS[3])
for i = 1, 64 do
  if i > n then break end
  redis.call('DEL', KEYS[14 + i])
end
redis.call('ZREM', KEYS[4], record)
redis.call('ZREM', KEYS[5], record)
redis.call('ZREM', KEYS[7], record)
for i = 0, 5 do redis.call('ZREM', KEYS[8 + i], record) end
if ARGV[4] ~= '' then redis.call('ZREM', KEYS[6], ARGV[4]) end
if ARGV[5] ~= '' then redis.call('XDEL', KEYS[14], ARGV[5]) end
return {RC.OK}

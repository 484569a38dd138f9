-- receive_record: a terminal saga arrives in its new partition (saga partitions
-- migrate). Its keys are restored from DUMPs taken in the old partition, with their
-- TTLs, and its index entries and dead letter are added, all in this partition's slot.
-- The old copy is removed afterwards by release_record (another slot: another call).
--
-- KEYS[1]  saga hash                 {p}:saga:<record>
-- KEYS[2]  history stream            {p}:hist:<record>
-- KEYS[3]  pages blob                {p}:pages:<record>
-- KEYS[4]  created index (zset)      {p}:idx:created
-- KEYS[5]  user index (zset)         {p}:idx:user:<user>
-- KEYS[6]  retired sagas (zset)      {p}:retired
-- KEYS[7]  review index (zset)       {p}:idx:review
-- KEYS[8]  the saga's state index    {p}:idx:state:<state>
-- KEYS[9]  dead letters of its step  {p}:dead:<step>
-- KEYS[10..9+n]  its cached LLM answers {p}:llm:<record>:...
-- ARGV[1]  operation id (the migration's)
-- ARGV[2]  record id
-- ARGV[3], ARGV[4]  saga hash DUMP and its PTTL (ms, <= 0: none)
-- ARGV[5], ARGV[6]  history DUMP ('' = none) and PTTL
-- ARGV[7], ARGV[8]  pages DUMP ('' = none) and PTTL
-- ARGV[9]  created score, ARGV[10] user index score, ARGV[11] state index score
-- ARGV[12] retired member ('' = none), ARGV[13] its score
-- ARGV[14] review score ('' = not flagged)
-- ARGV[15] dead letter fields as a JSON array [f1, v1, ...] ('' = none)
-- ARGV[16] n (<= 64), then per answer i: ARGV[15+2i] DUMP, ARGV[16+2i] PTTL
-- ARGV[17+2n] the saga's 'updated' field when it was copied (kept as 'mvup')
-- Returns: {RC.OK, dead_id}          restored ('' when it had no dead letter)
--          {RC.DUPLICATE, ''}        this migration already brought this version here
--          {RC.BUSY, ''}             another saga (or version) of that record is here:
--                                    nothing written
-- Emits:   a dead-letter entry (new id) when the saga had one
local saga, record, op = KEYS[1], ARGV[2], ARGV[1]

local function restore(key, dump, pttl)
  if dump ~= '' then
    local ttl = tonumber(pttl)
    if ttl < 0 then ttl = 0 end
    redis.call('RESTORE', key, ttl, dump, 'REPLACE')
  end
end

local n = tonumber(ARGV[16])
if n > 64 then return redis.error_reply('receive_record: at most 64 answers per record') end
local updated = ARGV[17 + 2 * n]
if redis.call('EXISTS', saga) == 1 then
  local mv = redis.call('HMGET', saga, 'mvop', 'mvup')
  if mv[1] == op and mv[2] == updated then return {RC.DUPLICATE, ''} end
  return {RC.BUSY, ''}
end

restore(saga, ARGV[3], ARGV[4])
restore(KEYS[2], ARGV[5], ARGV[6])
restore(KEYS[3], ARGV[7], ARGV[8])
for i = 1, 64 do
  if i > n then break end
  restore(KEYS[9 + i], ARGV[15 + 2 * i], ARGV[16 + 2 * i])
end
redis.call('HSET', saga, 'mvop', op, 'mvup', updated)
redis.call('ZADD', KEYS[4], ARGV[9], record)
redis.call('ZADD', KEYS[5], ARGV[10], record)
redis.call('ZADD', KEYS[8], ARGV[11], record)
if ARGV[12] ~= '' then redis.call('ZADD', KEYS[6], ARGV[13], ARGV[12]) end
if ARGV[14] ~= '' then redis.call('ZADD', KEYS[7], ARGV[14], record) end
local dead_id = ''
if ARGV[15] ~= '' then
  dead_id = redis.call('XADD', KEYS[9], '*', unpack(cjson.decode(ARGV[15])))
  redis.call('HSET', saga, 'dead_id', dead_id)
end
return {RC.OK, dead_id}

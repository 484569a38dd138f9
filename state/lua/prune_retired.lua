-- prune_retired: delete the completed sagas whose retention has ended, with their
-- index entries, so memory stays bounded however many sagas complete. Python reads
-- the due members of the retired set and passes their keys. A saga is deleted when
-- its 'ret' (the end of its retention, set by its last commit) has passed; one that
-- is alive again (an operator re-ran it: 'ret' cleared) keeps everything and leaves
-- the retired set. A saga an earlier release completed expired by TTL: its hash is
-- gone, and only its index entries (and any history left) are dropped.
--
-- KEYS[1]  retired sagas (zset: "<user>|<record>" -> due ms)
-- KEYS[2]  created index
-- KEYS[3..8] state indexes, in SagaState order
-- KEYS[9]  sagas flagged for review
-- KEYS[10+3(i-1)], KEYS[11+3(i-1)], KEYS[12+3(i-1)]  saga hash, history and user index
--          of candidate i
-- ARGV[1], ARGV[2]  member and record id of the first candidate; ARGV[2i-1], ARGV[2i]
--          those of candidate i (at most 100 candidates)
-- Returns: {RC.OK, pruned, kept_alive}
-- Emits:   nothing
--@include now

local retired, created = KEYS[1], KEYS[2]
local n = math.floor(#ARGV / 2)
if n > 100 then return redis.error_reply('prune_retired: at most 100 candidates per call') end
local now = now_ms()
local pruned, alive = 0, 0
for i = 1, n do
  local member, record = ARGV[2 * i - 1], ARGV[2 * i]
  local base = 10 + 3 * (i - 1)
  local saga, hist, user_index = KEYS[base], KEYS[base + 1], KEYS[base + 2]
  local due = redis.call('ZSCORE', retired, member)
  if due and tonumber(due) <= now then
    local s = redis.call('HMGET', saga, 'state', 'ret')
    local ret = tonumber(s[2] or '')
    if s[1] and not (ret and ret <= now) then
      alive = alive + 1
    else
      redis.call('DEL', saga, hist)
      redis.call('ZREM', user_index, record)
      redis.call('ZREM', created, record)
      for st = 0, 5 do redis.call('ZREM', KEYS[3 + st], record) end
      redis.call('ZREM', KEYS[9], record)
      pruned = pruned + 1
    end
    redis.call('ZREM', retired, member)
  end
end
return {RC.OK, pruned, alive}

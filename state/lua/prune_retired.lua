-- prune_retired: drop the index entries of completed sagas whose hash has expired
-- (the retention period), so the indexes stay bounded. Python reads the due
-- members of the retired set and passes their keys; a saga that exists again (an
-- operator re-ran it) keeps its entries and leaves the retired set.
--
-- KEYS[1]  retired sagas (zset: "<user>|<record>" -> expiry ms)
-- KEYS[2]  created index
-- KEYS[3..8] state indexes, in SagaState order
-- KEYS[9]  sagas flagged for review
-- KEYS[10+2(i-1)], KEYS[11+2(i-1)]  saga hash and user index of candidate i
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
  local saga, user_index = KEYS[10 + 2 * (i - 1)], KEYS[11 + 2 * (i - 1)]
  local due = redis.call('ZSCORE', retired, member)
  if due and tonumber(due) <= now then
    if redis.call('EXISTS', saga) == 1 then
      alive = alive + 1
    else
      redis.call('ZREM', user_index, record)
      redis.call('ZREM', created, record)
      for s = 0, 5 do redis.call('ZREM', KEYS[3 + s], record) end
      redis.call('ZREM', KEYS[9], record)
      pruned = pruned + 1
    end
    redis.call('ZREM', retired, member)
  end
end
return {RC.OK, pruned, alive}

-- prune_consumers: delete the consumers dead workers left on a ready stream, each only
-- if it holds no pending entry and has been idle long enough, checked and deleted in
-- one script: deleting a consumer drops its pending entries from the group, so a
-- worker that read between a separate check and the delete would lose what it read.
--
-- KEYS[1]  ready stream
-- ARGV[1]  consumer group
-- ARGV[2]  consumer to keep (the caller's own name)
-- ARGV[3]  minimum idle time (ms)
-- ARGV[4]  at most this many deletions, at most 100
-- Returns: {RC.OK, deleted}  (deleted is 0 when the stream or its group is missing)
-- Emits:   nothing (consumers are bookkeeping, not saga state)

local limit = tonumber(ARGV[4])
if limit > 100 then return redis.error_reply('prune_consumers: at most 100 per call') end
local ok, consumers = pcall(redis.call, 'XINFO', 'CONSUMERS', KEYS[1], ARGV[1])
if not ok then return {RC.OK, 0} end
local keep, idle_ms = ARGV[2], tonumber(ARGV[3])
local removed = 0
-- Bounded: at most 1,000 consumers looked at per call; deleted ones leave the list,
-- so later calls reach the rest.
for i = 1, 1000 do
  local row = consumers[i]
  if row == nil or removed >= limit then break end
  local c = {}
  for j = 1, 15, 2 do  -- name, pending, idle, inactive (and room for more)
    if row[j] == nil then break end
    c[row[j]] = row[j + 1]
  end
  if c.name ~= keep and tonumber(c.pending) == 0 and tonumber(c.idle) >= idle_ms then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], c.name)
    removed = removed + 1
  end
end
return {RC.OK, removed}

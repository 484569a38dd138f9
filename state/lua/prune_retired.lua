-- prune_retired: delete the ended sagas whose retention has passed, with everything they
-- own — hash, history, pages, dead letter — and their index entries, so memory stays
-- bounded however many sagas end. Python reads the due members of the retired set, and
-- each one's current step (its dead-letter stream's name), and passes their keys. A saga
-- is deleted when it is in a terminal state and its 'ret' (the end of its retention, set
-- by the transition that ended it) has passed; one that is alive again (an operator
-- re-ran or compensated it: 'ret' cleared, or a state that is not terminal) keeps
-- everything and leaves the retired set. One whose step is not the one Python read (it
-- moved in between) is left for the next pass. A saga an earlier release completed
-- expired by TTL: its hash is gone, and only its index entries (and any history left)
-- are dropped.
--
-- KEYS[1]  retired sagas (zset: "<user>|<record>" -> due ms)
-- KEYS[2]  created index
-- KEYS[3..8] state indexes, in SagaState order
-- KEYS[9]  sagas flagged for review
-- KEYS[10+5(i-1)] .. KEYS[14+5(i-1)]  saga hash, history, pages blob, user index and the
--          dead-letter stream of the step Python read (the saga hash again when the hash
--          was gone), of candidate i
-- ARGV[1], ARGV[2], ARGV[3]  member, record id and the step Python read ("" when the hash
--          was gone) of the first candidate; ARGV[3i-2..3i] those of candidate i (at most
--          100 candidates)
-- Returns: {RC.OK, pruned, kept_alive, moved}
-- Emits:   nothing
--@include now

local retired, created = KEYS[1], KEYS[2]
local n = math.floor(#ARGV / 3)
if n > 100 then return redis.error_reply('prune_retired: at most 100 candidates per call') end
local terminal = {[STATE.COMPLETED] = true, [STATE.FAILED] = true, [STATE.CANCELLED] = true,
                  [STATE.COMPENSATED] = true, [STATE.COMPENSATION_FAILED] = true}
local now = now_ms()
local pruned, alive, moved = 0, 0, 0
for i = 1, n do
  local member, record, step = ARGV[3 * i - 2], ARGV[3 * i - 1], ARGV[3 * i]
  local base = 10 + 5 * (i - 1)
  local saga, hist, pages, user_index = KEYS[base], KEYS[base + 1], KEYS[base + 2], KEYS[base + 3]
  local dead = KEYS[base + 4]
  local due = redis.call('ZSCORE', retired, member)
  if due and tonumber(due) <= now then
    local s = redis.call('HMGET', saga, 'state', 'ret', 'step', 'dead_id')
    local ret = tonumber(s[2] or '')
    if s[1] and (s[3] or '') ~= step then
      moved = moved + 1  -- its dead-letter stream is not the one passed: the next pass
    elseif s[1] and not (terminal[s[1]] and ret and ret <= now) then
      alive = alive + 1
      redis.call('ZREM', retired, member)
    else
      if s[4] and s[4] ~= '' then redis.call('XDEL', dead, s[4]) end
      redis.call('DEL', saga, hist, pages)
      redis.call('ZREM', user_index, record)
      redis.call('ZREM', created, record)
      for st = 0, 5 do redis.call('ZREM', KEYS[3 + st], record) end
      redis.call('ZREM', KEYS[9], record)
      redis.call('ZREM', retired, member)
      pruned = pruned + 1
    end
  end
end
return {RC.OK, pruned, alive, moved}

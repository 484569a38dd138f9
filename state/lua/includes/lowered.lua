-- Priorities (claim_steps, release_lowered, start_saga). A saga started with a priority
-- above 0 ('pri' in its hash) is listed in the step's urgent zset (record -> enqueue ms)
-- until its entry is claimed. While one is listed, a claim sets a priority-0 entry aside
-- ("lowered"): acknowledged, its saga stays pending with no entry ('dfr' = the entry),
-- and "<record>|<epoch>" waits in the lowered zset, scored by the saga's creation.
-- Lowered entries go back to the ready stream (a new entry {rid, ep, v}, the claim's
-- released-deferral path) once no urgent saga waits, or once older than the age bound
-- (the boost: no priority-0 saga is held back longer than it). Urgent members older
-- than the bound are dropped (a cancelled urgent saga holds nothing back for longer).

-- How many urgent sagas wait at the step (stale members pruned first).
local function urgent_waiting(urgent, now, bound)
  if redis.call('ZCARD', urgent) == 0 then return 0 end
  redis.call('ZREMRANGEBYSCORE', urgent, '-inf', '(' .. string.format('%d', now - bound))
  return redis.call('ZCARD', urgent)
end

-- Back to the stream: the oldest lowered entries (all of them when no urgent saga waits,
-- else those past the age bound), at most `most`. Returns how many.
local function release_lowered(ready, lowered, waiting, now, bound, most)
  if most > 1000 then return redis.error_reply('release_lowered: at most 1000') end
  local upto = '+inf'
  if waiting > 0 then upto = string.format('%d', now - bound) end
  local members = redis.call('ZRANGEBYSCORE', lowered, '-inf', upto, 'LIMIT', 0, most)
  for _, m in ipairs(members) do
    local bar = string.find(m, '|', 1, true)
    redis.call('XADD', ready, '*', 'rid', string.sub(m, 1, bar - 1),
               'ep', string.sub(m, bar + 1), 'v', SCHEMA_VERSION)
    redis.call('ZREM', lowered, m)
  end
  return #members
end

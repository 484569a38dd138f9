-- A commit or fail whose token is stale is refused. The refusal is recorded in
-- the history (a zombie executor stays visible; a late failure's error with it, as
-- `why`), and its input entry is acknowledged only if a newer entry superseded it:
-- acknowledging the current entry would hide it from the executor that now owns it.
-- A re-sent refusal (the op ids of the last four refusals are kept in the saga's
-- 'fop') is not recorded twice, even when other events were appended in between: four,
-- not one, because one commit batch may carry several stale attempts of a saga, and
-- the whole batch is re-sent after a connection loss.
local function fenced(saga, hist, ready, group, entry, maxlen, step, token, worker, now, s_entry,
                      op, why)
  if s_entry ~= entry then redis.call('XACK', ready, group, entry) end
  if op ~= '' then
    local seen = redis.call('HGET', saga, 'fop') or ''
    if string.find(' ' .. seen .. ' ', ' ' .. op .. ' ', 1, true) then return end
    local kept, pos = {op}, 1
    for _ = 1, 3 do
      local first, last = string.find(seen, '%S+', pos)
      if not first then break end
      kept[#kept + 1] = string.sub(seen, first, last)
      pos = last + 1
    end
    redis.call('HSET', saga, 'fop', table.concat(kept, ' '))
  end
  local detail = 'stale token ' .. token
  if why and why ~= '' then detail = detail .. '; late ' .. why end
  history_append(hist, maxlen, {'e', 'fenced', 's', step, 'w', worker, 't', now,
                                'x', detail, 'op', op})
end

-- Acknowledge a live attempt's input entry at its commit or fail. The controller may
-- have requeued that entry while the lease was lapsed (a heartbeat then revived it):
-- the saga's current entry is then this attempt's too, and is acknowledged with it.
local function ack_attempt(ready, group, entry, current)
  redis.call('XACK', ready, group, entry)
  if current and current ~= '' and current ~= entry then
    redis.call('XACK', ready, group, current)
  end
end

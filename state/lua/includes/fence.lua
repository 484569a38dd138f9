-- A commit or fail whose token is stale is refused. The refusal is recorded in
-- the history (a zombie executor stays visible), and its input entry is
-- acknowledged only if a newer entry superseded it: acknowledging the current
-- entry would hide it from the executor that now owns it. A re-sent refusal
-- (same op id as the last event) is not recorded twice.
local function fenced(saga, hist, ready, group, entry, maxlen, step, token, worker, now, s_entry, op)
  if s_entry ~= entry then redis.call('XACK', ready, group, entry) end
  local last = redis.call('XREVRANGE', hist, '+', '-', 'COUNT', 1)[1]
  if op ~= '' and last and last[2][2] == 'fenced' and last[2][12] == op then return end
  history_append(hist, maxlen, {'e', 'fenced', 's', step, 'w', worker, 't', now,
                                'x', 'stale token ' .. token, 'op', op})
end

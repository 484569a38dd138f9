-- A commit or fail whose token is stale is refused. The refusal is recorded in
-- the history (a zombie executor stays visible), and its input entry is
-- acknowledged only if a newer entry superseded it: acknowledging the current
-- entry would hide it from the executor that now owns it.
local function fenced(saga, hist, ready, group, entry, maxlen, step, token, worker, now, s_entry)
  if s_entry ~= entry then redis.call('XACK', ready, group, entry) end
  history_append(hist, maxlen, {'e', 'fenced', 's', step, 'w', worker, 't', now,
                                'x', 'stale token ' .. token})
end

-- Compensation: which steps to undo, and its start. ARGV[at+1..at+n] are the steps that
-- have a compensation, latest in the pipeline first (at most 32); the plan is those whose
-- output is stored (committed, not yet undone). `ready_at` is the KEYS position of the
-- undo ready stream of ARGV[at+1] (one per candidate, in the same order).
-- Lanes (includes/lanes) committed at 'ct:<step>': a run of them (the branches between a
-- fork and its join, side by side in the pipeline's order) is undone latest-committed first.
local function undo_plan(saga, at, n)
  local plan, heads, done = {}, {}, {}
  for i = 1, 32 do
    if i > n then break end
    local name = ARGV[at + i]
    local got = redis.call('HMGET', saga, 'out:' .. name, 'ct:' .. name)
    if got[1] then
      plan[#plan + 1] = name
      heads[#heads + 1] = i
      done[#done + 1] = tonumber(got[2])
    end
  end
  -- Insertion sort inside each run of lanes (at most 32 entries): latest commit first.
  for j = 2, 32 do
    if j > #plan then break end
    for k = j, 2, -1 do
      if not (done[k] and done[k - 1] and done[k] > done[k - 1]) then break end
      plan[k], plan[k - 1] = plan[k - 1], plan[k]
      heads[k], heads[k - 1] = heads[k - 1], heads[k]
      done[k], done[k - 1] = done[k - 1], done[k]
    end
  end
  return plan, heads[1] or 0
end

-- Enter 'compensating' in a new epoch (attempts count afresh, older tokens are fenced) and
-- enqueue the first undo; an empty plan ends 'compensated' at once. Appends the
-- 'compensating' event. A saga that had ended (failed, cancelled) is no longer due for
-- deletion; one compensated at once starts its retention (includes/retire: include it too).
-- Returns the new state, step and ready entry.
-- c = {saga, hist, ready_at, index_at, record, from, step, epoch, now, maxlen, op, why,
--      retired, user, ret}: ret is the retention table (StateLimits.retention)
local function begin_undo(c, plan, head)
  local epoch = c.epoch + 1
  local state, step, entry = STATE.COMPENSATED, c.step, ''
  if head > 0 then
    state, step = STATE.COMPENSATING, 'undo:' .. plan[1]
    entry = redis.call('XADD', KEYS[c.ready_at + head - 1], '*', 'rid', c.record, 'ep', epoch,
                       'v', SCHEMA_VERSION)
  end
  redis.call('HSET', c.saga, 'state', state, 'step', step, 'epoch', epoch,
             'undo', table.concat(plan, ','), 'token', '', 'lease', 0, 'worker', '',
             'entry', entry, 'due', 0, 'dead_id', '', 'updated', c.now)
  index_state(c.index_at, c.record, c.from, state, c.now)
  if head > 0 then
    unretire({saga = c.saga, retired = c.retired}, c.user, c.record)
  else
    retire({saga = c.saga, retired = c.retired}, c.user, c.record, c.now, c.ret, state)
  end
  local first = ''
  if head > 0 then first = step end
  history_append(c.hist, c.maxlen, {'e', 'compensating', 's', step, 'ep', epoch, 't', c.now,
                                    'n', first, 'x', c.why, 'op', c.op})
  return state, step, entry
end

-- Compensation: which steps to undo, and its start. ARGV[at+1..at+n] are the steps that
-- have a compensation, latest in the pipeline first (at most 32); the plan is those whose
-- output is stored (committed, not yet undone). `ready_at` is the KEYS position of the
-- undo ready stream of ARGV[at+1] (one per candidate, in the same order).
-- Lanes (includes/lanes) committed at 'ct:<step>': a run of them (the branches between a
-- fork and its join, side by side in the pipeline's order) is undone latest-committed first.
-- A map step (its counters 'map:<m>', includes/map_items) is undone item by item: the plan
-- holds '<m>[<i>]' for each item of its last run that committed ('mi' "<epoch>:d") and is
-- not undone yet (no 'mu:<m>:<i>' of that run, "<epoch>|<token>": commit_undo sets it),
-- latest commit first; failed, pending or running items are not undone (a running one's
-- commit is fenced).

-- A plan entry's step and item index (text; nil for a step that is no map's item).
local function undo_entry(e)
  local m, i = string.match(e or '', '^(.-)%[(%d+)%]$')
  if m then return m, i end
  return e or '', nil
end

-- The plan entries of map `m`'s committed items not yet undone, latest commit first
-- (at most 1000 items: MAP_MAX_FANIN, read 200 at a time).
local function undo_items(saga, m, counters)
  local e, n = string.match(counters, '^(%d+) (%d+) ')
  local got = {}
  if not e then return got end
  n = tonumber(n)
  for chunk = 0, 4 do
    local start = chunk * 200
    if start >= n then break end
    local names = {}
    for j = 0, 199 do
      if start + j >= n then break end
      local f = m .. ':' .. (start + j)
      names[#names + 1] = 'mi:' .. f
      names[#names + 1] = 'mc:' .. f
      names[#names + 1] = 'mu:' .. f
    end
    local r = redis.call('HMGET', saga, unpack(names))
    for j = 0, 199 do
      if 3 * j >= #names then break end
      local mu = r[3 * j + 3]
      if r[3 * j + 1] == e .. ':d' and not (mu and string.sub(mu, 1, #e + 1) == e .. '|') then
        got[#got + 1] = {start + j, tonumber(r[3 * j + 2]) or 0}
      end
    end
  end
  table.sort(got, function(a, b)
    if a[2] ~= b[2] then return a[2] > b[2] end
    return a[1] > b[1]
  end)
  local out = {}
  for j = 1, 1000 do
    if j > #got then break end
    out[j] = m .. '[' .. got[j][1] .. ']'
  end
  return out
end

local function undo_plan(saga, at, n)
  local plan, heads, done, items = {}, {}, {}, {}
  for i = 1, 32 do
    if i > n then break end
    local name = ARGV[at + i]
    local got = redis.call('HMGET', saga, 'out:' .. name, 'ct:' .. name, 'map:' .. name)
    local its = nil
    if got[3] then its = undo_items(saga, name, got[3]) end
    if (its and #its > 0) or (not its and got[1]) then
      plan[#plan + 1] = name
      heads[#heads + 1] = i
      done[#done + 1] = tonumber(got[2])
      items[name] = its
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
  -- A map's items take its place (at most 1000 each).
  local out = {}
  for j = 1, 32 do
    if j > #plan then break end
    local its = items[plan[j]]
    if its then
      for x = 1, 1000 do
        if x > #its then break end
        out[#out + 1] = its[x]
      end
    else
      out[#out + 1] = plan[j]
    end
  end
  return out, heads[1] or 0
end

local function begin_undo(c, plan, head)
  local epoch = c.epoch + 1
  local state, step, entry = STATE.COMPENSATED, c.step, ''
  if head > 0 then
    state, step = STATE.COMPENSATING, 'undo:' .. undo_entry(plan[1])
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

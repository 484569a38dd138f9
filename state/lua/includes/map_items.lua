-- Maps (saga.app_maps): a map step runs one child attempt per item of its parent's list.
-- While its items run the saga is 'running' at the map step with no token, entry or lease
-- of its own; each item keeps its attempt in fields of its own, '<f>:<map>:<i>' (i from 0):
-- mi (item state "<epoch>:<s>", s: p pending | r running | w waiting_retry | d done |
-- f failed; another epoch's value is no item of this run), mt (fencing token, from the
-- saga's one 'seq'), me (ready entry), ml (lease deadline ms), mw (worker), mc (claimed,
-- then committed ms), ma (attempts "<epoch>:<n>"), mx (lease expiries "<epoch>:<n>"),
-- mp (claim's op id), mo (output), mr (a failed item's error).
-- 'map:<map>' holds the run's counters, "<epoch> <items> <next> <open> <done> <failed>":
-- open items (released, not ended) are at most the map's concurrency; an item's end
-- releases the next. The end of the last item fans in, in the same script: the outputs
-- are gathered in item order into out:<map> and the next step is enqueued (once).

local MAP_MAX_FANIN = 1000  -- items a map may have (the spawn refuses more)

local function map_read(saga, m)
  local v = redis.call('HGET', saga, 'map:' .. m)
  if not v then return nil end
  local e, n, nx, open, done, failed = string.match(v, '^(%d+) (%d+) (%d+) (%d+) (%d+) (%d+)$')
  if not e then return nil end
  return {epoch = e, n = tonumber(n), next = tonumber(nx), open = tonumber(open),
          done = tonumber(done), failed = tonumber(failed)}
end

local function map_fields(m, c)
  return {'map:' .. m, string.format('%s %d %d %d %d %d', c.epoch, c.n, c.next, c.open, c.done,
                                     c.failed)}
end

-- The state letter of item value `v` in `epoch` (nil: not an item of this run).
local function item_state(v, epoch)
  if not v then return nil end
  local e, st = string.match(v, '^(%d+):(%a)$')
  if e ~= epoch then return nil end
  return st
end

local function item_f(f, m, i)
  return f .. ':' .. m .. ':' .. i
end

-- Release items while fewer than `conc` are open (at most 100 a call). k = {saga, ready};
-- writes the item fields; the caller writes the counters.
local function release_items(k, m, c, conc, record)
  for _ = 1, 100 do
    if c.open >= conc or c.next >= c.n then break end
    local i = string.format('%d', c.next)
    local entry = redis.call('XADD', k.ready, '*', 'rid', record, 'ep', c.epoch, 'i', i,
                             'v', SCHEMA_VERSION)
    redis.call('HSET', k.saga, item_f('mi', m, i), c.epoch .. ':p', item_f('me', m, i), entry)
    c.next = c.next + 1
    c.open = c.open + 1
  end
end

-- A value sealed by the workers (SAGA_DATA_KEY: state/sealing.py's marks start so).
local function sealed_value(v)
  return string.sub(v, 1, 3) == '\0sg'
end

-- The fan-in: gather the outputs in item order, route to the next step (or complete).
-- Sealed outputs cannot be joined into JSON here: they are kept as a sealed list
-- (sealing.LIST: netstrings of the JSON head, the tail and each item), which the workers
-- open into the same JSON.
-- k = {saga, hist, next_ready, index_at, retired}; f = {m, record, user, c, token, policy,
-- next_step, now_s, maxlen, op, ret}. Returns the saga's new state.
local function fan_in(k, f)
  local c, outs, failed, sealed = f.c, {}, {}, false
  for chunk = 0, 4 do  -- 5 chunks of 200 outputs: MAP_MAX_FANIN items
    local start = chunk * 200
    if start >= c.n then break end
    local names = {}
    for j = 1, 200 do
      if start + j - 1 >= c.n then break end
      names[j] = item_f('mo', f.m, start + j - 1)
    end
    local got = redis.call('HMGET', k.saga, unpack(names))
    for j = 1, 200 do
      if j > #names then break end
      local o = got[j]
      if not o then
        o = 'null'
        failed[#failed + 1] = string.format('%d', start + j - 1)
      end
      sealed = sealed or sealed_value(o)
      outs[#outs + 1] = o
    end
  end
  local head, tail = '', ''
  if f.policy == 'partial' then
    head = '{"results":'
    tail = ',"partial":' .. (#failed > 0 and 'true' or 'false') ..
           ',"failed":[' .. table.concat(failed, ',') .. ']}'
  end
  local out
  if sealed then
    local parts = {'\0sgL', #head, ':', head, #tail, ':', tail}
    for j = 1, 1000 do  -- MAP_MAX_FANIN
      if j > #outs then break end
      parts[#parts + 1] = #outs[j] .. ':' .. outs[j]
    end
    out = table.concat(parts)
  else
    out = head .. '[' .. table.concat(outs, ',') .. ']' .. tail
  end
  local state, entry = STATE.COMPLETED, ''
  local w = {'out:' .. f.m, out, 'done:' .. f.m, f.token, 'next:' .. f.m, f.next_step,
             'prev', f.m, 'token', '', 'lease', '0', 'worker', '', 'updated', f.now_s,
             'op', f.op}
  if f.next_step ~= '' then
    state = STATE.PENDING
    entry = redis.call('XADD', k.next_ready, '*', 'rid', f.record, 'ep', c.epoch,
                       'v', SCHEMA_VERSION)
    w[#w + 1] = 'step'
    w[#w + 1] = f.next_step
  end
  w[#w + 1] = 'state'
  w[#w + 1] = state
  w[#w + 1] = 'entry'
  w[#w + 1] = entry
  redis.call('HSET', k.saga, unpack(w))
  if state == STATE.COMPLETED then
    retire({saga = k.saga, retired = k.retired}, f.user, f.record, tonumber(f.now_s), f.ret,
           STATE.COMPLETED)
  end
  index_state(k.index_at, f.record, STATE.RUNNING, state, f.now_s)
  history_append(k.hist, f.maxlen, {'e', 'fanned_in', 's', f.m, 'ep', c.epoch, 't', f.now_s,
                                    'n', f.next_step, 'op', f.op,
                                    'x', c.n .. ' items, ' .. #failed .. ' failed'})
  return state
end

-- An item ended (done or failed for good): one fewer open, the next released, and the
-- fan-in when it was the last. k as fan_in's plus ready; f as fan_in's plus conc.
local function item_ended(k, f)
  local c = f.c
  c.open = c.open - 1
  release_items({saga = k.saga, ready = k.ready}, f.m, c, f.conc, f.record)
  redis.call('HSET', k.saga, unpack(map_fields(f.m, c)))
  if c.done + c.failed >= c.n then
    return fan_in({saga = k.saga, hist = k.hist, next_ready = k.next_ready,
                   index_at = k.index_at, retired = k.retired}, f)
  end
  return STATE.RUNNING
end

-- An item failed for good (its last attempt, or its lease expiries' cap): on_failure
-- 'partial' marks it failed and the map goes on; 'fail' dead-letters the saga at the map,
-- or, when a step before it with a compensation committed, enters 'compensating' (as
-- fail_step's dead path: includes/undo_plan); its other items are then fenced (the saga
-- is no longer running at the map). k as item_ended's plus dead, stats and undo_at (the
-- KEYS index of the first undo ready stream); f as item_ended's plus ec, em, attempt,
-- now, undo_args (the ARGV index before the undo steps: u, then the steps) and n_undo.
-- Returns the saga's new state.
local function item_dead(k, f, i)
  redis.call('HSET', k.saga, item_f('mi', f.m, i), f.c.epoch .. ':f',
             item_f('mr', f.m, i), f.ec .. ': ' .. f.em)
  if f.policy == 'partial' then
    f.c.failed = f.c.failed + 1
    return item_ended({saga = k.saga, hist = k.hist, ready = k.ready, next_ready = k.next_ready,
                       index_at = k.index_at, retired = k.retired}, f)
  end
  local plan, head = undo_plan(k.saga, f.undo_args, f.n_undo)
  if head > 0 then
    redis.call('HSET', k.saga, 'ec', f.ec, 'em', f.em)
    redis.call('HINCRBY', k.stats, 'dead:' .. f.m, 1)
    return begin_undo({saga = k.saga, hist = k.hist, ready_at = k.undo_at,
                       index_at = k.index_at, record = f.record, from = STATE.RUNNING,
                       step = f.m, epoch = tonumber(f.c.epoch), now = f.now,
                       maxlen = f.maxlen, op = f.op, retired = k.retired, user = f.user,
                       ret = f.ret, why = 'item ' .. i .. ' of map ' .. f.m .. ' failed for good'},
                      plan, head)
  end
  dead_letter({saga = k.saga, dead = k.dead, stats = k.stats, first_index = k.index_at,
               retired = k.retired},
              {record = f.record, user = f.user, step = f.m, attempt = f.attempt,
               epoch = f.c.epoch, from = STATE.RUNNING, ec = f.ec, em = f.em, now = f.now,
               ret = f.ret})
  return STATE.FAILED
end

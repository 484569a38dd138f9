-- commit_undo: the exactly-once end of an undo attempt (commit_steps for a compensating
-- saga). Token-checked; in one script it moves the undone step's output from out:<step>
-- to undone:<step> (its effect no longer stands, but people still read what it was),
-- acknowledges the entry, enqueues the next undo of the plan or ends the
-- saga 'compensated'; an undo of a map's item ('<map>[<i>]' at the head of the plan,
-- includes/undo_plan) marks that item undone ('mu:<map>:<i>': "<the map run's epoch>|<the
-- commit token>", so an item of a later run of the map is not taken for undone), and
-- when the next undo is the same map's, its attempts count afresh; attributes the attempt's LLM cost as commit_steps does (the saga's
-- cost:undo:<step>, the day's totals, the user's spend that budgets check), and appends
-- the history. A second commit of the same attempt returns the recorded result, writing
-- nothing. The error that led to the compensation
-- (ec, em) is kept: a compensated saga still says why.
--
-- KEYS[1]  saga hash
-- KEYS[2]  history stream
-- KEYS[3]  ready stream of this undo step
-- KEYS[4]  ready stream of the next undo step (KEYS[3] again when there is none)
-- KEYS[5]  partition counters   {p}:stats
-- KEYS[6..11] state indexes, in keys.INDEXED order
-- KEYS[12] day's cost totals    {p}:costs:<yyyy-mm-dd>
-- KEYS[13] month's spend per user   {p}:spend:<yyyy-mm>
-- KEYS[14..13+n] cached LLM answers the attempt used (their unattributed cost is added)
-- KEYS[14+n] retired sagas (zset: "<user>|<record>" -> due ms; includes/retire)
-- KEYS[15+n] budget holds {p}:holds, KEYS[16+n] their deadlines {p}:holds:due: the hold
--          of each cached-answer key, if any, is released (includes/holds)
-- ARGV[1]  undo step name (undo:<step>)
-- ARGV[2]  fencing token
-- ARGV[3]  ready entry id
-- ARGV[4]  consumer group
-- ARGV[5]  next undo step as the claim's plan said ("" ends the compensation); checked
--          against the stored plan
-- ARGV[6]  operation id
-- ARGV[7]  history MAXLEN
-- ARGV[8]  worker name
-- ARGV[9]  LLM cost of the attempt (USD, decimal)
-- ARGV[10] LLM tokens used by the attempt
-- ARGV[11] n: number of cached-answer keys at KEYS[14..], at most 64
-- ARGV[12] day of the month of KEYS[12] ("01".."31"): the day's spend field in KEYS[13]
-- ARGV[13] retention per state (StateLimits.retention's table): a compensated saga's starts
-- ARGV[14] the item this attempt undoes, as its claim's plan said ("" for a step): a
--          re-sent commit of an item undone already is a duplicate
-- Returns: {RC.OK, state, next_step, next_entry}
--          {RC.DUPLICATE, state, next_step}   this attempt was already committed
--          {RC.NOT_FOUND}
--          {RC.LEASE_LOST, state}             stale token: nothing written but a 'fenced' event
--          {RC.WRONG_STATE, 'plan', plan}     ARGV[5] is not the plan's next: nothing written
-- Emits:   history 'committed' (n: the next undo step, "" when compensated; c and k only
--          when set; i: the item, for a map's); ready entry {rid, ep, v} for the next undo step
--@include now
--@include history
--@include state_index
--@include fence
--@include holds
--@include cost
--@include committed_event
--@include retire
--@include undo_plan

local saga, hist, ready, next_ready = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local step, token, entry, group, next_step = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local op, maxlen, worker = ARGV[6], ARGV[7], ARGV[8]
local undone = string.sub(step, 6)

local s = redis.call('HMGET', saga, 'state', 'step', 'token', 'entry', 'epoch', 'rid',
                     'claimed', 'done:' .. step, 'att:' .. step, 'undo', 'uid',
                     'map:' .. undone)
if not s[1] then return {RC.NOT_FOUND} end
local item_arg = ARGV[14] or ''
local undone_item = ''
if item_arg ~= '' then undone_item = 'mu:' .. undone .. ':' .. item_arg end
local mark = item_arg ~= '' and redis.call('HGET', saga, undone_item)
if mark and string.sub(mark, -(#token + 1)) == '|' .. token then
  redis.call('HSET', saga, undone_item, mark)  -- replicated, as commit_steps' repeat
  return {RC.DUPLICATE, s[1], redis.call('HGET', saga, 'next:' .. step) or ''}
end
if s[8] == token then
  redis.call('HSET', saga, 'done:' .. step, token)  -- replicated, as commit_steps' repeat
  return {RC.DUPLICATE, s[1], redis.call('HGET', saga, 'next:' .. step) or ''}
end
local now = now_ms()
if s[1] ~= STATE.COMPENSATING or s[2] ~= step or s[3] ~= token then
  fenced(saga, hist, ready, group, entry, maxlen, step, token, worker, now, s[4], op, '')
  return {RC.LEASE_LOST, s[1]}
end
local rest = string.match(s[10] or '', '^[^,]*,(.*)$') or ''
local _, item = undo_entry(string.match(s[10] or '', '^([^,]*)'))
local expected = undo_entry(string.match(rest, '^([^,]*)') or '')
if expected ~= '' then expected = 'undo:' .. expected end
if next_step ~= expected then return {RC.WRONG_STATE, 'plan', s[10] or ''} end

local record, epoch = s[6], tonumber(s[5])
local attempt = tonumber(string.match(s[9] or '', ':(%d+)$') or '0')
local duration = now - tonumber(s[7] or now)
local cost = (tonumber(ARGV[9]) or 0) + attributed_cost(14, tonumber(ARGV[11]) or 0, token,
  {holds = KEYS[15 + (tonumber(ARGV[11]) or 0)], due = KEYS[16 + (tonumber(ARGV[11]) or 0)]})
ack_attempt(ready, group, entry, s[4])
local state, next_entry = STATE.COMPENSATED, ''
if next_step ~= '' then
  state = STATE.COMPENSATING
  next_entry = redis.call('XADD', next_ready, '*', 'rid', record, 'ep', epoch, 'v', SCHEMA_VERSION)
end
local kept = redis.call('HGET', saga, 'out:' .. undone)
if kept then redis.call('HSET', saga, 'undone:' .. undone, kept) end
redis.call('HDEL', saga, 'out:' .. undone)
local f = {'done:' .. step, token, 'next:' .. step, next_step, 'undo', rest, 'token', '',
           'lease', 0, 'worker', '', 'updated', now, 'op', op,
           'state', state, 'entry', next_entry}
if next_step ~= '' then
  f[#f + 1] = 'step'
  f[#f + 1] = next_step
end
redis.call('HSET', saga, unpack(f))
if item then
  local run = string.match(s[12] or '', '^(%d+) ') or ''
  redis.call('HSET', saga, 'mu:' .. undone .. ':' .. item, run .. '|' .. token)
  if next_step == step then redis.call('HDEL', saga, 'att:' .. step, 'lx:' .. step) end
end
redis.call('HINCRBY', KEYS[5], 'committed:' .. step, 1)
add_cost({saga = saga, costs = KEYS[12], spend = KEYS[13], dd = ARGV[12]}, s[11], step, cost)
index_state(6, record, STATE.COMPENSATING, state, now)
if state == STATE.COMPENSATED then
  retire({saga = saga, retired = KEYS[14 + (tonumber(ARGV[11]) or 0)]}, s[11], record, now,
         ARGV[13], state)
end
local ev = committed_event(step, attempt, epoch, worker, now, duration, next_step, op, cost,
                           ARGV[10])
if item then
  ev[#ev + 1] = 'i'
  ev[#ev + 1] = item
end
history_append(hist, maxlen, ev)
return {RC.OK, state, next_step, next_entry}

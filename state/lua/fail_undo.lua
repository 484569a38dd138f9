-- fail_undo: the end of a failed undo attempt (fail_step for a compensating saga),
-- token-checked. The action is decided in Python, as for a step:
--   retry  run the undo again after delay_ms (the saga stays 'compensating')
--   park   like retry, but the attempt is refunded (a circuit breaker was open)
--   dead   the compensation failed for good: 'compensation_failed', and a dead letter
--          with the reason on the undo step's dead-letter stream
-- The input entry is acknowledged in every case, and the attempt's LLM cost attributed
-- as fail_step does; a second fail of the same attempt returns the recorded result,
-- writing nothing.
--
-- KEYS[1]  saga hash
-- KEYS[2]  history stream
-- KEYS[3]  ready stream of the undo step
-- KEYS[4]  delayed retries of the undo step (zset: record -> due ms)
-- KEYS[5]  dead-letter stream of the undo step
-- KEYS[6]  partition counters   {p}:stats
-- KEYS[7..12] state indexes, in keys.INDEXED order
-- KEYS[13] day's cost totals    {p}:costs:<yyyy-mm-dd>
-- KEYS[14] month's spend per user   {p}:spend:<yyyy-mm>
-- KEYS[15..14+n] cached LLM answers the attempt used (their unattributed cost is added)
-- KEYS[15+n] retired sagas (zset: "<user>|<record>" -> due ms; includes/retire)
-- KEYS[16+n] budget holds {p}:holds, KEYS[17+n] their deadlines {p}:holds:due: the hold
--          of each cached-answer key, if any, is released (includes/holds)
-- ARGV[1]  undo step name (undo:<step>)
-- ARGV[2]  fencing token
-- ARGV[3]  ready entry id
-- ARGV[4]  consumer group
-- ARGV[5]  action: retry | park | dead
-- ARGV[6]  delay before the retry (ms)
-- ARGV[7]  error class
-- ARGV[8]  error message (already redacted)
-- ARGV[9]  operation id
-- ARGV[10] history MAXLEN
-- ARGV[11] worker name
-- ARGV[12] LLM cost of the attempt (USD)
-- ARGV[13] LLM tokens used by the attempt
-- ARGV[14] n: number of cached-answer keys at KEYS[15..], at most 64
-- ARGV[15] day of the month of KEYS[13] ("01".."31"): the day's spend field in KEYS[14]
-- ARGV[16] retention per state (StateLimits.retention's table): a dead letter's starts
-- Returns: {RC.OK, state, due_ms | dead_entry_id}
--          {RC.DUPLICATE, state}       this attempt's failure was already recorded
--          {RC.NOT_FOUND}
--          {RC.LEASE_LOST, state}      stale token: only a 'fenced' event is written
-- Emits:   history 'retry_scheduled' | 'parked' | 'dead_lettered' (i: the item, for an
--          undo of a map's item: includes/undo_plan); a dead letter
--@include now
--@include history
--@include state_index
--@include fence
--@include holds
--@include cost
--@include retire
--@include dead_letter
--@include undo_plan

local saga, hist, ready = KEYS[1], KEYS[2], KEYS[3]
local step, token, entry, group, action = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local ec, em, op, maxlen, worker = ARGV[7], ARGV[8], ARGV[9], ARGV[10], ARGV[11]

local s = redis.call('HMGET', saga, 'state', 'step', 'token', 'entry', 'epoch', 'uid', 'rid',
                     'claimed', 'failtok', 'att:' .. step, 'undo')
if not s[1] then return {RC.NOT_FOUND} end
if s[9] == token then
  redis.call('HSET', saga, 'failtok', token)  -- replicated, as fail_step's repeat
  return {RC.DUPLICATE, s[1]}
end
local now = now_ms()
if s[1] ~= STATE.COMPENSATING or s[2] ~= step or s[3] ~= token then
  fenced(saga, hist, ready, group, entry, maxlen, step, token, worker, now, s[4], op,
         'error ' .. ec .. ': ' .. em)
  return {RC.LEASE_LOST, s[1]}
end

local record, user, epoch = s[7], s[6], tonumber(s[5])
local attempt = tonumber(string.match(s[10] or '', ':(%d+)$') or '0')
local duration = now - tonumber(s[8] or now)
local cost = (tonumber(ARGV[12]) or 0) + attributed_cost(15, tonumber(ARGV[14]) or 0, token,
  {holds = KEYS[16 + (tonumber(ARGV[14]) or 0)], due = KEYS[17 + (tonumber(ARGV[14]) or 0)]})
ack_attempt(ready, group, entry, s[4])
redis.call('HINCRBY', KEYS[6], 'failed:' .. step, 1)
add_cost({saga = saga, costs = KEYS[13], spend = KEYS[14], dd = ARGV[15]}, user, step, cost)
redis.call('HSET', saga, 'failtok', token, 'op', op)
local ev = {'a', attempt, 'ep', epoch, 's', step, 'w', worker, 't', now, 'd', duration,
            'ec', ec, 'em', em, 'c', cost, 'k', ARGV[13] or '0', 'op', op}
local _, item = undo_entry(string.match(s[11] or '', '^([^,]*)'))
if item then
  ev[#ev + 1] = 'i'
  ev[#ev + 1] = item
end

if action == 'dead' then
  local retired = KEYS[15 + (tonumber(ARGV[14]) or 0)]
  local id = dead_letter({saga = saga, dead = KEYS[5], stats = KEYS[6], first_index = 7,
                          retired = retired},
                         {record = record, user = user, step = step, attempt = attempt,
                          epoch = epoch, from = STATE.COMPENSATING, ec = ec, em = em, now = now,
                          to = STATE.COMPENSATION_FAILED, ret = ARGV[16]})
  ev[#ev + 1] = 'e'
  ev[#ev + 1] = 'dead_lettered'
  history_append(hist, maxlen, ev)
  return {RC.OK, STATE.COMPENSATION_FAILED, id}
end

local due = now + tonumber(ARGV[6])
-- ec and em keep the error that led to the compensation; the history has this one.
-- 'pec': why this undo waits when it is parked (its ec is the compensation's cause), so
-- raising a budget wakes it as it wakes a parked step (unpark_sagas).
local pec = ''
if action == 'park' then pec = ec end
redis.call('HSET', saga, 'token', '', 'lease', 0, 'worker', '', 'entry', '', 'due', due,
           'updated', now, 'pec', pec)
redis.call('ZADD', KEYS[4], due, record)
ev[#ev + 1] = 'due'
ev[#ev + 1] = due
ev[#ev + 1] = 'e'
if action == 'park' then
  redis.call('HSET', saga, 'att:' .. step, epoch .. ':' .. math.max(attempt - 1, 0))
  ev[#ev + 1] = 'parked'
else
  redis.call('HINCRBY', KEYS[6], 'retried:' .. step, 1)
  ev[#ev + 1] = 'retry_scheduled'
end
history_append(hist, maxlen, ev)
return {RC.OK, STATE.COMPENSATING, due}

-- fail_step: the end of a failed attempt, token-checked. The action is decided
-- in Python (saga.state.policy) from the error type and attempts, applied here:
--   retry  schedule the step again after delay_ms (sorted set by due time)
--   park   like retry, but the attempt is refunded (a circuit breaker was open, or the
--          user's LLM budget is spent: the error class says which)
--   dead   mark the saga failed and append a dead letter with the reason; or, when a
--          committed step has a compensation (ARGV[18] > 0 and one of ARGV[19..] has its
--          output stored), enter 'compensating' instead: no dead letter, the reason stays
--          in the saga and its history, the first undo is enqueued
-- The input entry is acknowledged in every case; a second fail of the same
-- attempt returns the recorded result, writing nothing.
-- A lane's attempt (includes/lanes) is told by its token: a retry or park leaves the
-- saga running (its other lanes go on) with the lane waiting; dead fails the saga there.
--
-- KEYS[1]  saga hash
-- KEYS[2]  history stream
-- KEYS[3]  ready stream of the step
-- KEYS[4]  delayed retries of the step (zset: record -> due ms)
-- KEYS[5]  dead-letter stream of the step
-- KEYS[6]  partition counters   {p}:stats
-- KEYS[7]  day's cost totals    {p}:costs:<yyyy-mm-dd>
-- KEYS[8..13] state indexes, in SagaState order
-- KEYS[14] month's spend per user   {p}:spend:<yyyy-mm>
-- KEYS[15] users' slots of this step        {p}:inflight:<step>  (see includes/user_cap)
-- KEYS[16] entries deferred by the user cap  {p}:deferred:<step>
-- KEYS[17..16+n] cached LLM answers the attempt used (their unattributed cost is added)
-- KEYS[17+n..16+n+u] undo ready streams of ARGV[19..18+u], in that order (dead only)
-- KEYS[17+n+u] retired sagas (zset: "<user>|<record>" -> due ms; includes/retire)
-- KEYS[18+n+u] budget holds {p}:holds, KEYS[19+n+u] their deadlines {p}:holds:due: the
--          hold of each cached-answer key, if any, is released (includes/holds)
-- ARGV[1]  step name
-- ARGV[2]  fencing token
-- ARGV[3]  ready entry id
-- ARGV[4]  consumer group
-- ARGV[5]  action: retry | park | dead
-- ARGV[6]  delay before the retry (ms)
-- ARGV[7]  error class
-- ARGV[8]  error message (already redacted)
-- ARGV[9]  operation id
-- ARGV[10] history MAXLEN
-- ARGV[11] LLM cost of the attempt (USD)
-- ARGV[12] worker name
-- ARGV[13] LLM tokens used by the attempt
-- ARGV[14] n: number of cached-answer keys at KEYS[17..], at most 64
-- ARGV[15] day of the month of KEYS[7] ("01".."31"): the day's spend field in KEYS[14]
-- ARGV[16] "1" when the step has a per-user cap: the attempt's slot in KEYS[15] goes to
--          its user's oldest deferred entry (sent to KEYS[3]); "0" leaves KEYS[15..16]
-- ARGV[17] lease of this step (ms): how long that released entry's slot is held for it
-- ARGV[18] u: number of steps with a compensation that follow (0: none), at most 32
-- ARGV[19..18+u] those steps, latest in the pipeline first
-- ARGV[19+u] retention per state (StateLimits.retention's table): a dead letter's starts
-- ARGV[20+u] the version of the step's code ("1" unless declared; absent from an older
--          caller: 1): any other is written in the event and the dead letter ('sv')
-- Returns: {RC.OK, state, due_ms | dead_entry_id | first undo step}
--          {RC.DUPLICATE, state}       this attempt's failure was already recorded
--          {RC.NOT_FOUND}
--          {RC.LEASE_LOST, state}      stale token: only a 'fenced' event is written
--                                      (once per op id), naming the late error
-- Emits:   history 'retry_scheduled' | 'parked' | 'dead_lettered' (sv only when set); a
--          dead letter (sv only when set), or
--          (compensation) 'dead_lettered' (x = 'compensating'), 'compensating' and an undo
--          ready entry {rid, ep, v}
--@include now
--@include history
--@include state_index
--@include fence
--@include holds
--@include cost
--@include retire
--@include dead_letter
--@include user_cap
--@include undo_plan
--@include lanes

local saga, hist, ready = KEYS[1], KEYS[2], KEYS[3]
local step, token, entry, group, action = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local ec, em, maxlen, worker = ARGV[7], ARGV[8], ARGV[10], ARGV[12]
local n_cost, n_undo = tonumber(ARGV[14]) or 0, tonumber(ARGV[18]) or 0
if n_undo > 32 then return redis.error_reply('fail_step: at most 32 steps to undo') end
local retired, ret = KEYS[17 + n_cost + n_undo], ARGV[19 + n_undo]
local version = ARGV[20 + n_undo] or '1'
if version == '' then version = '1' end

local s = redis.call('HMGET', saga, 'state', 'step', 'token', 'entry', 'epoch', 'uid', 'rid',
                     'claimed', 'failtok', 'att:' .. step, 'sect', 'ls@' .. step, 'lt@' .. step,
                     'le@' .. step, 'lc@' .. step, 'lf@' .. step)
if not s[1] then return {RC.NOT_FOUND} end
-- A lane's attempt (includes/lanes): its token, entry, claim time and failure are its own.
local lane = s[13] == token and lane_live(s[1], s[11], s[5])
if lane or (s[16] == token and lane_live(s[1], s[11], s[5])) then
  s[2], s[3], s[4], s[8], s[9] = step, s[13], s[14], s[15], s[16]
  if s[12] ~= STATE.RUNNING then s[3] = '' end
end
if s[9] == token then
  -- Rewritten unchanged so the repeat is replicated: a WAIT after it (durability=replica)
  -- then also covers the first call's writes, whichever connection sent them.
  if lane or s[16] == token then
    redis.call('HSET', saga, 'lf@' .. step, token)
  else
    redis.call('HSET', saga, 'failtok', token)
  end
  return {RC.DUPLICATE, s[1]}
end
local now = now_ms()
if s[1] ~= STATE.RUNNING or s[2] ~= step or s[3] ~= token then
  fenced(saga, hist, ready, group, entry, maxlen, step, token, worker, now, s[4], ARGV[9],
         'error ' .. ec .. ': ' .. em)
  return {RC.LEASE_LOST, s[1]}
end

local record, user, epoch = s[7], s[6], tonumber(s[5])
local attempt = tonumber(string.match(s[10] or '', ':(%d+)$') or '0')
local duration = now - tonumber(s[8] or now)
local cost = (tonumber(ARGV[11]) or 0) + attributed_cost(17, n_cost, token,
  {holds = KEYS[18 + n_cost + n_undo], due = KEYS[19 + n_cost + n_undo]})

ack_attempt(ready, group, entry, s[4])
if ARGV[16] == '1' then
  end_capped({inflight = KEYS[15], deferred = KEYS[16], ready = ready}, user, record, now,
             tonumber(ARGV[17]))
end
redis.call('HINCRBY', KEYS[6], 'failed:' .. step, 1)
add_cost({saga = saga, costs = KEYS[7], spend = KEYS[14], dd = ARGV[15]}, user, step,
         cost)
if lane then
  redis.call('HSET', saga, 'lf@' .. step, token, 'op', ARGV[9])
else
  redis.call('HSET', saga, 'failtok', token, 'op', ARGV[9])
end
local ev = {'a', attempt, 'ep', epoch, 's', step, 'w', worker, 't', now, 'd', duration,
            'ec', ec, 'em', em, 'c', cost, 'k', ARGV[13], 'op', ARGV[9]}
if version ~= '1' then  -- which code failed, as a commit records which code committed
  ev[#ev + 1] = 'sv'
  ev[#ev + 1] = version
end

if action == 'dead' then
  -- The saga failed at this lane ('failtok': a re-sent fail finds it once no lane is live).
  if lane then redis.call('HSET', saga, 'step', step, 'failtok', token) end
  local plan, head = undo_plan(saga, 18, n_undo)
  if head > 0 then
    ev[#ev + 1] = 'e'
    ev[#ev + 1] = 'dead_lettered'
    ev[#ev + 1] = 'x'
    ev[#ev + 1] = STATE.COMPENSATING
    redis.call('HSET', saga, 'ec', ec, 'em', em)
    redis.call('HINCRBY', KEYS[6], 'dead:' .. step, 1)
    history_append(hist, maxlen, ev)
    local state, first = begin_undo({saga = saga, hist = hist, ready_at = 17 + n_cost,
                                     index_at = 8, record = record, from = STATE.RUNNING,
                                     step = step, epoch = epoch, now = now, maxlen = maxlen,
                                     op = ARGV[9], why = 'step ' .. step .. ' failed for good',
                                     retired = retired, user = user, ret = ret},
                                    plan, head)
    return {RC.OK, state, first}
  end
  local id = dead_letter({saga = saga, dead = KEYS[5], stats = KEYS[6], first_index = 8,
                          retired = retired},
                         {record = record, user = user, step = step, attempt = attempt,
                          epoch = epoch, from = STATE.RUNNING, ec = ec, em = em, now = now,
                          ret = ret, sv = version})
  ev[#ev + 1] = 'e'
  ev[#ev + 1] = 'dead_lettered'
  history_append(hist, maxlen, ev)
  return {RC.OK, STATE.FAILED, id}
end

local due = now + tonumber(ARGV[6])
if lane then  -- the saga runs on (its other lanes); this lane waits for its retry
  redis.call('HSET', saga, 'ls@' .. step, STATE.WAITING_RETRY, 'lt@' .. step, '',
             'll@' .. step, 0, 'lw@' .. step, '', 'le@' .. step, '', 'ec', ec, 'em', em,
             'updated', now)
else
  redis.call('HSET', saga, 'state', STATE.WAITING_RETRY, 'token', '', 'lease', 0, 'worker', '',
             'entry', '', 'due', due, 'ec', ec, 'em', em, 'updated', now)
  index_state(8, record, STATE.RUNNING, STATE.WAITING_RETRY, now)
end
redis.call('ZADD', KEYS[4], due, record)
ev[#ev + 1] = 'due'
ev[#ev + 1] = due
ev[#ev + 1] = 'e'
if action == 'park' then
  -- A parked attempt is not spent: the dependency was down, not the step.
  redis.call('HSET', saga, 'att:' .. step, epoch .. ':' .. math.max(attempt - 1, 0))
  redis.call('HINCRBY', KEYS[6], 'parked:' .. step, 1)
  ev[#ev + 1] = 'parked'
else
  redis.call('HINCRBY', KEYS[6], 'retried:' .. step, 1)
  ev[#ev + 1] = 'retry_scheduled'
end
history_append(hist, maxlen, ev)
return {RC.OK, STATE.WAITING_RETRY, due}

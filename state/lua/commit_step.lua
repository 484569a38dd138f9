-- commit_step: the exactly-once end of an attempt. Token-checked; in one script
-- it writes the step output, acknowledges the input entry, enqueues the next
-- step (or completes the saga), attributes the cost and appends the history.
-- A second commit of the same attempt returns the recorded result, writing nothing.
--
-- KEYS[1]  saga hash
-- KEYS[2]  history stream
-- KEYS[3]  ready stream of this step
-- KEYS[4]  ready stream of the next step (KEYS[3] again when there is none)
-- KEYS[5]  pages blob
-- KEYS[6]  partition counters   {p}:stats
-- KEYS[7]  day's cost totals    {p}:costs:<yyyy-mm-dd>
-- KEYS[8]  retired sagas (zset: "<user>|<record>" -> expiry ms), swept by prune_retired
-- KEYS[9..14] state indexes, in SagaState order
-- KEYS[15] sagas flagged for review (zset: record -> ms flagged)
-- KEYS[16] month's spend per user   {p}:spend:<yyyy-mm>
-- KEYS[17] users' slots of this step        {p}:inflight:<step>  (see includes/user_cap)
-- KEYS[18] entries deferred by the user cap  {p}:deferred:<step>
-- KEYS[19..18+n] cached LLM answers the attempt used (their unattributed cost is added)
-- ARGV[1]  step name
-- ARGV[2]  fencing token
-- ARGV[3]  ready entry id of the input
-- ARGV[4]  consumer group
-- ARGV[5]  next step name ("" completes the saga)
-- ARGV[6]  step output (JSON)
-- ARGV[7]  operation id
-- ARGV[8]  history MAXLEN
-- ARGV[9]  pages blob to store ("" = none)
-- ARGV[10] pages TTL (s)
-- ARGV[11] "1" to delete the pages blob
-- ARGV[12] LLM cost of the attempt (USD, decimal)
-- ARGV[13] checkpoint (JSON, "" = none), stored as ckpt:<step>
-- ARGV[14] retention of a completed saga (s)
-- ARGV[15] worker name
-- ARGV[16] LLM tokens used by the attempt
-- ARGV[17] n: number of cached-answer keys at KEYS[19..], at most 64
-- ARGV[18] review reason ("" = none): the output needs a person's look before it is
--          trusted; stored as rv:<step>, the record joins KEYS[15]
-- ARGV[19] day of the month of KEYS[7] ("01".."31"): the day's spend field in KEYS[16]
-- ARGV[20] "1" when the step has a per-user cap: the attempt's slot in KEYS[17] goes to
--          its user's oldest deferred entry (sent to KEYS[3]); "0" leaves KEYS[17..18]
-- ARGV[21] lease of this step (ms): how long that released entry's slot is held for it
-- Returns: {RC.OK, state, next_step, next_entry}
--          {RC.DUPLICATE, state, next_step}   this attempt was already committed
--          {RC.NOT_FOUND}
--          {RC.LEASE_LOST, state}             stale token: nothing written but a 'fenced' event
-- Emits:   history 'committed' (fields c, k and rv only when set); ready entry {rid, ep, v}
--          for the next step
--@include now
--@include history
--@include state_index
--@include fence
--@include cost
--@include user_cap

local saga, hist, ready, next_ready = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local step, token, entry, group, next_step = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local maxlen, worker = ARGV[8], ARGV[15]

local s = redis.call('HMGET', saga, 'state', 'step', 'token', 'entry', 'epoch', 'uid', 'rid',
                     'claimed', 'done:' .. step, 'att:' .. step)
if not s[1] then return {RC.NOT_FOUND} end
if s[9] == token then
  -- Rewritten unchanged so the repeat is replicated: a WAIT after it (durability=replica)
  -- then also covers the first call's writes, whichever connection sent them.
  redis.call('HSET', saga, 'done:' .. step, token)
  return {RC.DUPLICATE, s[1], redis.call('HGET', saga, 'next:' .. step) or ''}
end
local now = now_ms()
if s[1] ~= STATE.RUNNING or s[2] ~= step or s[3] ~= token then
  fenced(saga, hist, ready, group, entry, maxlen, step, token, worker, now, s[4], ARGV[7], '')
  return {RC.LEASE_LOST, s[1]}
end

local record, user, epoch = s[7], s[6], tonumber(s[5])
local attempt = tonumber(string.match(s[10] or '', ':(%d+)$') or '0')
local duration = now - tonumber(s[8] or now)
local cost = (tonumber(ARGV[12]) or 0) + attributed_cost(19, tonumber(ARGV[17]) or 0, token)

ack_attempt(ready, group, entry, s[4])
if ARGV[20] == '1' then
  end_capped({inflight = KEYS[17], deferred = KEYS[18], ready = ready}, user, record, now,
             tonumber(ARGV[21]))
end
local state, next_entry = STATE.COMPLETED, ''
if next_step ~= '' then
  state = STATE.PENDING
  next_entry = redis.call('XADD', next_ready, '*', 'rid', record, 'ep', epoch, 'v', SCHEMA_VERSION)
end
-- One HSET for every field (each redis.call costs ~2 µs of conversion on the server).
local f = {'out:' .. step, ARGV[6], 'done:' .. step, token, 'next:' .. step, next_step,
           'prev', step, 'token', '', 'lease', 0, 'worker', '', 'updated', now, 'ec', '', 'em', '',
           'op', ARGV[7], 'state', state, 'entry', next_entry}
if next_step ~= '' then
  f[#f + 1] = 'step'
  f[#f + 1] = next_step
end
if ARGV[13] ~= '' then
  f[#f + 1] = 'ckpt:' .. step
  f[#f + 1] = ARGV[13]
end
local review = ARGV[18] or ''
if review ~= '' then
  f[#f + 1] = 'rv:' .. step
  f[#f + 1] = review
  redis.call('ZADD', KEYS[15], now, record)
  redis.call('HINCRBY', KEYS[6], 'review:' .. step, 1)
end
redis.call('HSET', saga, unpack(f))
if ARGV[9] ~= '' then redis.call('SET', KEYS[5], ARGV[9], 'EX', ARGV[10]) end
if ARGV[11] == '1' then redis.call('DEL', KEYS[5]) end
add_cost({saga = saga, costs = KEYS[7], spend = KEYS[16], dd = ARGV[19]}, user, step,
         cost)
redis.call('HINCRBY', KEYS[6], 'committed:' .. step, 1)

index_state(9, record, STATE.RUNNING, state, now)
local ev = {'e', 'committed', 's', step, 'a', attempt, 'ep', epoch, 'w', worker, 't', now,
            'd', duration, 'n', next_step, 'op', ARGV[7]}
-- Cost and tokens only when there are some: most steps call no model, and every
-- field is paid for in server CPU, the AOF and memory on each transition.
if cost > 0 then
  ev[#ev + 1] = 'c'
  ev[#ev + 1] = cost
end
if ARGV[16] ~= '0' and ARGV[16] ~= '' then
  ev[#ev + 1] = 'k'
  ev[#ev + 1] = ARGV[16]
end
if review ~= '' then
  ev[#ev + 1] = 'rv'
  ev[#ev + 1] = review
end
history_append(hist, maxlen, ev)
if state == STATE.COMPLETED then
  local retention = tonumber(ARGV[14])
  redis.call('EXPIRE', saga, retention)
  redis.call('EXPIRE', hist, retention)
  -- Its index entries go when it expires: prune_retired sweeps them then.
  redis.call('ZADD', KEYS[8], now + retention * 1000, user .. '|' .. record)
end
return {RC.OK, state, next_step, next_entry}

-- fail_items: the end of one map item's failed attempt (includes/map_items), token-checked.
-- The action is decided in Python (saga.retry), applied here:
--   retry  the item waits delay_ms (the map's item retries, promote_items), still open
--   park   like retry, the attempt refunded (a dependency was down, not the item)
--   dead   on_failure 'partial': the item is failed, the map goes on (the last item's end
--          fans in); 'fail': the saga is dead-lettered at the map (or compensating, see
--          ARGV[20]), its other items fenced
-- The item's entry is acknowledged in every case; a second fail of the same attempt
-- returns the recorded result, writing nothing.
--
-- KEYS[1]  saga hash
-- KEYS[2]  history stream
-- KEYS[3]  ready stream of the map step
-- KEYS[4]  item retries of the map (zset: "<record>|<item>|<epoch>" -> due ms)
-- KEYS[5]  dead-letter stream of the map step
-- KEYS[6]  partition counters   {p}:stats
-- KEYS[7]  day's cost totals    {p}:costs:<yyyy-mm-dd>
-- KEYS[8]  month's spend per user   {p}:spend:<yyyy-mm>
-- KEYS[9..14] state indexes, in SagaState order
-- KEYS[15] retired sagas (zset; includes/retire)
-- KEYS[16] ready stream of the step after the map (KEYS[3] again when there is none)
-- KEYS[17] budget holds {p}:holds, KEYS[18] their deadlines {p}:holds:due (includes/holds)
-- KEYS[19..18+c] cached LLM answers the attempt used (their unattributed cost is added,
--          the budget hold of each, if any, released)
-- KEYS[19+c..18+c+u] undo ready streams of ARGV[21..20+u], in that order (dead, 'fail'
--          only)
-- ARGV[1]  consumer group
-- ARGV[2]  map step name
-- ARGV[3]  item index
-- ARGV[4]  fencing token
-- ARGV[5]  ready entry id of the item
-- ARGV[6]  action: retry | park | dead
-- ARGV[7]  delay before the retry (ms)
-- ARGV[8]  error class
-- ARGV[9]  error message (already redacted)
-- ARGV[10] operation id
-- ARGV[11] worker name
-- ARGV[12] LLM cost of the attempt (USD)
-- ARGV[13] LLM tokens used by the attempt
-- ARGV[14] concurrency (items open at once, 1..100)
-- ARGV[15] the step after the map ("" completes the saga)
-- ARGV[16] on_failure: fail | partial
-- ARGV[17] history MAXLEN
-- ARGV[18] day of the month of KEYS[7] ("01".."31")
-- ARGV[19] retention per state (StateLimits.retention's table)
-- ARGV[20] u: number of steps with a compensation (0: none), at most 32
-- ARGV[21..20+u] those steps, latest in the pipeline first: with on_failure 'fail', an
--          item dead enters 'compensating' when one of them has its output stored
-- ARGV[21+u] c: number of cached-answer keys, at most 64
-- Returns: {RC.OK, state, due_ms | ""}   state: running (the map goes on), failed,
--                                        compensating, compensated, or the fan-in's
--                                        (pending, completed)
--          {RC.DUPLICATE, state}          this attempt's failure was already recorded
--          {RC.NOT_FOUND}
--          {RC.LEASE_LOST, state}         stale token: only a 'fenced' event is written
-- Emits:   history 'retry_scheduled' | 'parked' | 'dead_lettered' (i: the item), maybe
--          'fanned_in'; a dead letter, or 'compensating' and an undo ready entry
--          {rid, ep, v} ('fail'); ready entries of items released
--@include now
--@include history
--@include state_index
--@include fence
--@include holds
--@include cost
--@include retire
--@include dead_letter
--@include undo_plan
--@include map_items

local saga, hist, ready = KEYS[1], KEYS[2], KEYS[3]
local group, m, i, token, entry = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local action, ec, em, op, worker = ARGV[6], ARGV[8], ARGV[9], ARGV[10], ARGV[11]
local maxlen = ARGV[17]
local conc = tonumber(ARGV[14])
if conc < 1 or conc > 100 then return redis.error_reply('fail_items: concurrency 1..100') end
local n_undo = tonumber(ARGV[20])
if n_undo > 32 then return redis.error_reply('fail_items: at most 32 steps to undo') end
local n_cost = tonumber(ARGV[21 + n_undo])
if n_cost > 64 then return redis.error_reply('fail_items: at most 64 cached answers') end

local s = redis.call('HMGET', saga, 'state', 'step', 'epoch', 'uid', 'rid', item_f('mi', m, i),
                     item_f('mt', m, i), item_f('me', m, i), item_f('mc', m, i),
                     item_f('ma', m, i))
if not s[1] then return {RC.NOT_FOUND} end
local epoch = s[3]
local st = item_state(s[6], string.match(token, '^(%d+):') or '')
if (st == 'w' or st == 'f') and s[7] == token then
  redis.call('HSET', saga, item_f('mt', m, i), token)  -- replicated again (see commit_steps)
  return {RC.DUPLICATE, s[1]}
end
local now = now_ms()
local now_s = string.format('%d', now)
local c = map_read(saga, m)
if s[1] ~= STATE.RUNNING or s[2] ~= m or c == nil or c.epoch ~= epoch
   or item_state(s[6], epoch) ~= 'r' or s[7] ~= token then
  fenced(saga, hist, ready, group, entry, maxlen, m .. '[' .. i .. ']', token, worker, now_s,
         s[8], op, 'error ' .. ec .. ': ' .. em)
  return {RC.LEASE_LOST, s[1]}
end

local record, user = s[5], s[4]
local attempt = tonumber(string.match(s[10] or '', ':(%d+)$') or '0')
local duration = now - tonumber(s[9] or now)
local cost = (tonumber(ARGV[12]) or 0)
             + attributed_cost(19, n_cost, token, {holds = KEYS[17], due = KEYS[18]})
ack_attempt(ready, group, entry, s[8])
redis.call('HINCRBY', KEYS[6], 'failed:' .. m, 1)
add_cost({saga = saga, costs = KEYS[7], spend = KEYS[8], dd = ARGV[18]}, user, m, cost)
redis.call('HSET', saga, item_f('ml', m, i), '0', 'updated', now_s, 'op', op)
local ev = {'a', attempt, 'ep', epoch, 's', m, 'i', i, 'w', worker, 't', now_s, 'd', duration,
            'ec', ec, 'em', em, 'c', cost, 'k', ARGV[13], 'op', op}

if action == 'dead' then
  ev[#ev + 1] = 'e'
  ev[#ev + 1] = 'dead_lettered'
  history_append(hist, maxlen, ev)
  local state = item_dead({saga = saga, hist = hist, ready = ready, next_ready = KEYS[16],
                           index_at = 9, retired = KEYS[15], dead = KEYS[5], stats = KEYS[6],
                           undo_at = 19 + n_cost},
                          {m = m, record = record, user = user, c = c, token = token,
                           policy = ARGV[16], next_step = ARGV[15], now_s = now_s,
                           maxlen = maxlen, op = op, ret = ARGV[19], conc = conc, ec = ec,
                           em = em, attempt = attempt, now = now_s, undo_args = 20,
                           n_undo = n_undo}, i)
  return {RC.OK, state, ''}
end

local due = string.format('%d', now + tonumber(ARGV[7]))
redis.call('HSET', saga, item_f('mi', m, i), epoch .. ':w', item_f('mr', m, i), ec .. ': ' .. em)
redis.call('ZADD', KEYS[4], due, record .. '|' .. i .. '|' .. epoch)
ev[#ev + 1] = 'due'
ev[#ev + 1] = due
ev[#ev + 1] = 'e'
if action == 'park' then
  redis.call('HSET', saga, item_f('ma', m, i), epoch .. ':' .. math.max(attempt - 1, 0))
  redis.call('HINCRBY', KEYS[6], 'parked:' .. m, 1)
  ev[#ev + 1] = 'parked'
else
  redis.call('HINCRBY', KEYS[6], 'retried:' .. m, 1)
  ev[#ev + 1] = 'retry_scheduled'
end
history_append(hist, maxlen, ev)
return {RC.OK, STATE.RUNNING, due}

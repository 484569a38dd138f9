-- commit_items: the exactly-once end of one map item's attempt (includes/map_items),
-- token-checked: stores the item's output, acknowledges its entry, attributes the cost to
-- the saga's user, appends the history, releases the next item; the last item's commit
-- fans in (the outputs gathered in item order, the next step enqueued), once. A second
-- commit of the attempt (a re-sent batch) returns the recorded result, writing nothing.
--
-- KEYS[1]  saga hash
-- KEYS[2]  history stream
-- KEYS[3]  ready stream of the map step
-- KEYS[4]  ready stream of the step after the map (KEYS[3] again when there is none)
-- KEYS[5]  partition counters   {p}:stats
-- KEYS[6]  day's cost totals    {p}:costs:<yyyy-mm-dd>
-- KEYS[7]  month's spend per user   {p}:spend:<yyyy-mm>
-- KEYS[8..13] state indexes, in SagaState order
-- KEYS[14] retired sagas (zset; includes/retire)
-- KEYS[15] budget holds {p}:holds, KEYS[16] their deadlines {p}:holds:due (includes/holds)
-- KEYS[17..16+c] cached LLM answers the attempt used (their unattributed cost is added,
--          the budget hold of each, if any, released)
-- ARGV[1]  consumer group
-- ARGV[2]  map step name
-- ARGV[3]  item index
-- ARGV[4]  fencing token
-- ARGV[5]  ready entry id of the item
-- ARGV[6]  item output (JSON)
-- ARGV[7]  operation id
-- ARGV[8]  worker name
-- ARGV[9]  LLM cost of the attempt (USD, decimal)
-- ARGV[10] LLM tokens used by the attempt
-- ARGV[11] concurrency (items open at once, 1..100)
-- ARGV[12] the step after the map ("" completes the saga)
-- ARGV[13] on_failure: fail | partial (the fan-in's shape)
-- ARGV[14] history MAXLEN
-- ARGV[15] day of the month of KEYS[6] ("01".."31")
-- ARGV[16] retention per state (StateLimits.retention's table)
-- ARGV[17] c: number of cached-answer keys, at most 64
-- Returns: {RC.OK, state, next_step}   state: running (items go on), or the fan-in's
--                                      (pending at next_step, or completed)
--          {RC.DUPLICATE, state}       this attempt was already committed
--          {RC.NOT_FOUND}
--          {RC.LEASE_LOST, state}      stale token: nothing written but a 'fenced' event
-- Emits:   history 'committed' (i: the item) and, on the fan-in, 'fanned_in'; ready
--          entries {rid, ep, i, v} of items released, {rid, ep, v} of the next step
--@include now
--@include history
--@include state_index
--@include fence
--@include holds
--@include cost
--@include committed_event
--@include retire
--@include map_items

local saga, hist, ready = KEYS[1], KEYS[2], KEYS[3]
local group, m, i, token, entry = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local op, worker, maxlen = ARGV[7], ARGV[8], ARGV[14]
local conc = tonumber(ARGV[11])
if conc < 1 or conc > 100 then return redis.error_reply('commit_items: concurrency 1..100') end
local n_cost = tonumber(ARGV[17])
if n_cost > 64 then return redis.error_reply('commit_items: at most 64 cached answers') end

local s = redis.call('HMGET', saga, 'state', 'step', 'epoch', 'uid', 'rid', item_f('mi', m, i),
                     item_f('mt', m, i), item_f('me', m, i), item_f('mc', m, i),
                     item_f('ma', m, i))
if not s[1] then return {RC.NOT_FOUND} end
local epoch = s[3]
local st = item_state(s[6], string.match(token, '^(%d+):') or '')
if st == 'd' and s[7] == token then
  redis.call('HSET', saga, item_f('mt', m, i), token)  -- replicated again (see commit_steps)
  return {RC.DUPLICATE, s[1]}
end
local now = now_ms()
local now_s = string.format('%d', now)
local c = map_read(saga, m)
if s[1] ~= STATE.RUNNING or s[2] ~= m or c == nil or c.epoch ~= epoch
   or item_state(s[6], epoch) ~= 'r' or s[7] ~= token then
  fenced(saga, hist, ready, group, entry, maxlen, m .. '[' .. i .. ']', token, worker, now_s,
         s[8], op, '')
  return {RC.LEASE_LOST, s[1]}
end

local record, user = s[5], s[4]
local attempt = string.match(s[10] or '', ':(%d+)$') or '0'
local duration = string.format('%d', now - (tonumber(s[9]) or now))
local cost = (tonumber(ARGV[9]) or 0)
             + attributed_cost(17, n_cost, token, {holds = KEYS[15], due = KEYS[16]})
ack_attempt(ready, group, entry, s[8])
redis.call('HSET', saga, item_f('mi', m, i), epoch .. ':d', item_f('mo', m, i), ARGV[6],
           item_f('mc', m, i), now_s, item_f('ml', m, i), '0', 'updated', now_s, 'op', op)
add_cost({saga = saga, costs = KEYS[6], spend = KEYS[7], dd = ARGV[15]}, user, m, cost)
redis.call('HINCRBY', KEYS[5], 'committed:' .. m, 1)
local ev = committed_event(m, attempt, epoch, worker, now_s, duration, '', op, cost, ARGV[10])
ev[#ev + 1] = 'i'
ev[#ev + 1] = i
history_append(hist, maxlen, ev)
c.done = c.done + 1
local state = item_ended({saga = saga, hist = hist, ready = ready, next_ready = KEYS[4],
                          index_at = 8, retired = KEYS[14]},
                         {m = m, record = record, user = user, c = c, token = token,
                          policy = ARGV[13], next_step = ARGV[12], now_s = now_s,
                          maxlen = maxlen, op = op, ret = ARGV[16], conc = conc})
return {RC.OK, state, state == STATE.RUNNING and '' or ARGV[12]}

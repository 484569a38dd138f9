-- park_wait: the end of a claimed attempt at a wait step (@app.wait, @app.sleep). No user
-- code runs there: the worker that claimed it sends this instead of a commit. When a
-- signal for the wait's event was kept (it arrived before the saga got here), it is
-- consumed at once and the next step is enqueued, as the signal itself would have done;
-- otherwise the saga parks 'waiting' with no lease, and its timer (the timeout, or the
-- sleep's end) joins the partition's waits (zset record -> due ms) for the sweep. A kept
-- signal older than ARGV[14] is dropped, not consumed (signal_saga's bounds).
-- A review gate (ARGV[15] = '1', app.review_gate) waits for no event: a saga no step
-- flagged for review (not in KEYS[12]) passes it at once, its input passed through; a
-- flagged one parks ('wgate' 1) until accept_review or the completing decide_review
-- moves it on, or its timer takes the gate's path.
--
-- KEYS[1]  saga hash
-- KEYS[2]  history stream
-- KEYS[3]  ready stream of the wait step
-- KEYS[4]  ready stream of the next step
-- KEYS[5]  the partition's waits   {p}:waits
-- KEYS[6..11] state indexes, in SagaState order
-- KEYS[12] sagas flagged for review (zset; read only for a gate)
-- ARGV[1]  wait step name
-- ARGV[2]  fencing token
-- ARGV[3]  ready entry id of the input
-- ARGV[4]  consumer group
-- ARGV[5]  event ("" for a sleep: only the timer ends it)
-- ARGV[6]  next step name
-- ARGV[7]  due time: ms, absolute; "+<ms>" from now by the server's clock; 0 = no timer
-- ARGV[8]  on timeout: 'fail' | 'compensate' | 'default' | 'continue' (a sleep)
-- ARGV[9]  default output (JSON, sealed as outputs are; "" = none)
-- ARGV[10] steps to undo on a 'compensate' timeout, latest first, comma-separated
-- ARGV[11] operation id
-- ARGV[12] history MAXLEN
-- ARGV[13] worker name
-- ARGV[14] how old a kept signal may be and still be consumed (ms; 7 days)
-- ARGV[15] '1': the wait is a review gate
-- Returns: {RC.OK, STATE.WAITING, due}             parked
--          {RC.OK, STATE.PENDING, next, entry}     a kept signal was consumed, or an
--                                                  unflagged saga passed the gate
--          {RC.DUPLICATE, state}                   this attempt was already parked or ended
--          {RC.NOT_FOUND}
--          {RC.LEASE_LOST, state}                  stale token: only a 'fenced' event
-- Emits:   history 'waiting' (x: event, due; a gate: 'review'), 'gate_passed', or
--          'signalled' (x: signal id), after a
--          'signal_expired' (x: event and id) for a kept signal too old; a ready entry
--          {rid, ep, v} for the next step when a kept signal was consumed
--@include now
--@include history
--@include state_index
--@include fence
--@include wait

local saga, hist, ready, next_ready, waits = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local step, token, entry, group, event = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local next_step, due, op, maxlen = ARGV[6], ARGV[7], ARGV[11], ARGV[12]

local s = redis.call('HMGET', saga, 'state', 'step', 'token', 'entry', 'epoch', 'rid',
                     'done:' .. step, 'wtok')
if not s[1] then return {RC.NOT_FOUND} end
if s[7] == token or (s[1] == STATE.WAITING and s[2] == step and s[8] == token) then
  return {RC.DUPLICATE, s[1]}
end
local now = now_ms()
if s[1] ~= STATE.RUNNING or s[2] ~= step or s[3] ~= token then
  fenced(saga, hist, ready, group, entry, maxlen, step, token, ARGV[13], now, s[4], op, '')
  return {RC.LEASE_LOST, s[1]}
end
local record, epoch = s[6], s[5]
if string.sub(due, 1, 1) == '+' then
  due = string.format('%d', now + (tonumber(string.sub(due, 2)) or 0))
end
ack_attempt(ready, group, entry, s[4])

local gate = ARGV[15] == '1'
if gate and not redis.call('ZSCORE', KEYS[12], record) then
  local out = redis.call('HGET', saga, 'out:' .. (redis.call('HGET', saga, 'prev') or '_input'))
  local next_entry = end_wait({saga = saga, next_ready = next_ready, record = record,
    step = step, next_step = next_step, epoch = epoch, token = token, now = now, op = op,
    from = STATE.RUNNING, index_at = 6}, out or '{}')
  history_append(hist, maxlen, {'e', 'gate_passed', 's', step, 'ep', epoch, 't', now,
                                'n', next_step, 'x', 'not flagged for review',
                                'w', ARGV[13], 'op', op})
  return {RC.OK, STATE.PENDING, next_step, next_entry}
end

if event ~= '' and not gate then
  local kept = redis.call('HMGET', saga, 'sig:' .. event, 'sgi:' .. event, 'sgt:' .. event)
  if kept[1] then
    redis.call('HDEL', saga, 'sig:' .. event, 'sgi:' .. event, 'sgt:' .. event)
    redis.call('HINCRBY', saga, 'nsk', -1)
    if now - (tonumber(kept[3]) or now) > (tonumber(ARGV[14]) or 604800000) then kept[1] = nil end
    if not kept[1] then  -- said in its history: a sender can see why the saga still waits
      history_append(hist, maxlen, {'e', 'signal_expired', 's', step, 'ep', epoch, 't', now,
                                    'x', event .. ' ' .. (kept[2] or ''), 'op', op})
    end
  end
  if kept[1] then
    local next_entry = end_wait({saga = saga, next_ready = next_ready, record = record,
      step = step, next_step = next_step, epoch = epoch, token = token, now = now, op = op,
      from = STATE.RUNNING, index_at = 6}, kept[1])
    history_append(hist, maxlen, {'e', 'signalled', 's', step, 'ep', epoch, 't', now,
                                  'n', next_step, 'x', event .. ' ' .. (kept[2] or ''),
                                  'w', ARGV[13], 'op', op})
    return {RC.OK, STATE.PENDING, next_step, next_entry}
  end
end

redis.call('HSET', saga, 'state', STATE.WAITING, 'token', '', 'lease', 0, 'worker', '',
           'entry', '', 'due', due, 'wtok', token, 'wev', event, 'wdue', due,
           'wnext', next_step, 'wto', ARGV[8], 'wdef', ARGV[9], 'wundo', ARGV[10],
           'wgate', gate and '1' or '', 'updated', now, 'op', op)
index_state(6, record, STATE.RUNNING, STATE.WAITING, now)
if tonumber(due) > 0 then
  redis.call('ZADD', waits, due, record)
else  -- a timer of an earlier wait of this saga (re-run by an operator) is no longer its
  redis.call('ZREM', waits, record)
end
history_append(hist, maxlen, {'e', 'waiting', 's', step, 'ep', epoch, 't', now,
                              'x', gate and 'review' or event,
                              'due', due, 'w', ARGV[13], 'op', op})
return {RC.OK, STATE.WAITING, due}

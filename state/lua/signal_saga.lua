-- signal_saga: deliver a named event to a saga. A saga waiting for that event moves on
-- at once (the signal's data is its wait step's output; the next step is enqueued). A
-- saga not there yet keeps it ('sig:<event>', 'sgi:<event>' in its hash) for its wait to
-- consume; one kept signal per event: a second, other id, while one is kept is recorded
-- as seen and dropped. A signal id already seen is a no-op ('sid:<id>' in the hash, so
-- retention and purge delete them with the saga). Bounded: at most ARGV[7] signals kept
-- at once ('nsk' counts them; each kept one's time is 'sgt:<event>', park_wait drops one
-- older than its limit) and ARGV[8] signal ids remembered ('nsi'): past either, refused.
--
-- KEYS[1]  saga hash
-- KEYS[2]  history stream
-- KEYS[3]  ready stream of the step after the wait (as the caller read 'wnext')
-- KEYS[4]  the partition's waits   {p}:waits
-- KEYS[5..10] state indexes, in SagaState order
-- ARGV[1]  event
-- ARGV[2]  signal id
-- ARGV[3]  data (JSON, sealed as outputs are)
-- ARGV[4]  the step after the wait as the caller read it ('wnext'; "" when not waiting)
-- ARGV[5]  operation id
-- ARGV[6]  history MAXLEN
-- ARGV[7]  most signals kept at once for waits to come (16)
-- ARGV[8]  most signal ids remembered per saga (1000)
-- Returns: {RC.OK, state, 'consumed', next_step}   the wait ended
--          {RC.OK, state, 'kept'}                   kept for the wait to come
--          {RC.OK, state, 'dropped'}                another signal of the event is kept
--          {RC.DUPLICATE, state, 'seen'}            this signal id was delivered before
--          {RC.NOT_FOUND}
--          {RC.WRONG_STATE, state, why}            the saga has ended ('ended'), or it
--                                                   waits for another next step than the
--                                                   caller read ('step_moved': read again),
--                                                   or a bound: 'too_many_kept',
--                                                   'too_many_ids' (nothing written)
-- Emits:   history 'signalled' (x: signal id) or 'signal_kept'; ready entry {rid, ep, v}
--@include now
--@include history
--@include state_index
--@include wait

local saga, hist, next_ready, waits = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local event, sid, data, op, maxlen = ARGV[1], ARGV[2], ARGV[3], ARGV[5], ARGV[6]

local s = redis.call('HMGET', saga, 'state', 'step', 'epoch', 'rid', 'wev', 'wnext', 'wtok',
                     'sid:' .. sid, 'sig:' .. event, 'nsk', 'nsi')
if not s[1] then return {RC.NOT_FOUND} end
if s[8] then return {RC.DUPLICATE, s[1], 'seen'} end
local ended = {[STATE.COMPLETED] = true, [STATE.FAILED] = true, [STATE.CANCELLED] = true,
               [STATE.COMPENSATING] = true, [STATE.COMPENSATED] = true,
               [STATE.COMPENSATION_FAILED] = true}
if ended[s[1]] then return {RC.WRONG_STATE, s[1], 'ended'} end
local most_kept, most_ids = tonumber(ARGV[7]) or 16, tonumber(ARGV[8]) or 1000
if (tonumber(s[11]) or 0) >= most_ids then return {RC.WRONG_STATE, s[1], 'too_many_ids'} end
local now = now_ms()

if s[1] == STATE.WAITING and s[5] == event then
  if s[6] ~= ARGV[4] then return {RC.WRONG_STATE, s[1], 'step_moved'} end
  redis.call('HSET', saga, 'sid:' .. sid, event)
  redis.call('HINCRBY', saga, 'nsi', 1)
  redis.call('ZREM', waits, s[4])
  end_wait({saga = saga, next_ready = next_ready, record = s[4], step = s[2],
            next_step = s[6], epoch = s[3], token = s[7], now = now, op = op,
            from = STATE.WAITING, index_at = 5}, data)
  history_append(hist, maxlen, {'e', 'signalled', 's', s[2], 'ep', s[3], 't', now,
                                'n', s[6], 'x', event .. ' ' .. sid, 'op', op})
  return {RC.OK, STATE.PENDING, 'consumed', s[6]}
end

if not s[9] and (tonumber(s[10]) or 0) >= most_kept then
  return {RC.WRONG_STATE, s[1], 'too_many_kept'}
end
redis.call('HSET', saga, 'sid:' .. sid, event)
redis.call('HINCRBY', saga, 'nsi', 1)
if s[9] then return {RC.OK, s[1], 'dropped'} end
redis.call('HSET', saga, 'sig:' .. event, data, 'sgi:' .. event, sid, 'sgt:' .. event, now)
redis.call('HINCRBY', saga, 'nsk', 1)
history_append(hist, maxlen, {'e', 'signal_kept', 's', s[2], 'ep', s[3], 't', now,
                              'x', event .. ' ' .. sid, 'op', op})
return {RC.OK, s[1], 'kept'}

-- accept_review: a person has checked a saga's flagged results and accepts them.
-- Clears every review flag (rv:<step>) of the saga, takes it out of the review
-- index and records who accepted it. The next run of a step (an operator's retry)
-- may flag it again. A saga parked at a review gate (park_wait, 'wgate') moves on in the
-- same call: the gate's input passed through, the step after it enqueued; any other
-- saga's state does not change.
--
-- KEYS[1]  saga hash
-- KEYS[2]  history stream
-- KEYS[3]  sagas flagged for review (zset)
-- KEYS[4]  retired sagas (zset: "<user>|<record>" -> due ms; includes/retire)
-- KEYS[5]  ready stream of the step after the gate (as the caller read 'wnext'; any key
--          of the partition when the saga does not wait)
-- KEYS[6..11] state indexes, in SagaState order
-- KEYS[12] the partition's waits   {p}:waits
-- ARGV[1]  operation id
-- ARGV[2]  history MAXLEN
-- ARGV[3]  who accepted, and why (free text)
-- ARGV[4]  retention per state (StateLimits.retention's table): a completed saga kept for
--          its review is kept from now on for the completed retention
-- ARGV[5]  the step after the gate as the caller read it ('wnext'; "" when not waiting)
-- ARGV[6..] the pipeline's step names (at most 32)
-- Returns: {RC.OK, flags_cleared, next}          next: the step the gate let on ("" none)
--          {RC.DUPLICATE, flags_cleared}    same op id: nothing written
--          {RC.NOT_FOUND}
--          {RC.WRONG_STATE, 'not_flagged'}  no step flagged the saga
--          {RC.WRONG_STATE, 'step_moved'}   the gate's 'wnext' is not the caller's: read
--                                           again (nothing written)
-- Emits:   history 'reviewed'; at a gate, 'gate_passed' and a ready entry {rid, ep, v}
--@include now
--@include history
--@include op
--@include retire
--@include state_index
--@include wait

local saga, hist, index = KEYS[1], KEYS[2], KEYS[3]
local replay = op_replay(saga, ARGV[1], 'review_op')
if replay then return replay end
local s = redis.call('HMGET', saga, 'state', 'step', 'epoch', 'rid', 'uid', 'wgate', 'wnext',
                     'wtok')
if not s[1] then return {RC.NOT_FOUND} end
local gated = s[1] == STATE.WAITING and s[6] == '1'
if gated and s[7] ~= ARGV[5] then return {RC.WRONG_STATE, 'step_moved'} end
local cleared = 0
for i = 6, 37 do
  if not ARGV[i] then break end
  cleared = cleared + redis.call('HDEL', saga, 'rv:' .. ARGV[i])
end
if cleared == 0 then return {RC.WRONG_STATE, 'not_flagged'} end
redis.call('ZREM', index, s[4])
local now = now_ms()
if s[1] == STATE.COMPLETED then
  retire({saga = saga, retired = KEYS[4]}, s[5], s[4], now, ARGV[4], STATE.COMPLETED)
end
history_append(hist, ARGV[2], {'e', 'reviewed', 's', s[2], 'ep', s[3], 't', now, 'x', ARGV[3],
                               'op', ARGV[1]})
local moved = ''
if gated then
  local out = redis.call('HGET', saga, 'out:' .. (redis.call('HGET', saga, 'prev') or '_input'))
  redis.call('ZREM', KEYS[12], s[4])
  end_wait({saga = saga, next_ready = KEYS[5], record = s[4], step = s[2], next_step = s[7],
            epoch = s[3], token = s[8] or '', now = now, op = ARGV[1], from = STATE.WAITING,
            index_at = 6}, out or '{}')
  history_append(hist, ARGV[2], {'e', 'gate_passed', 's', s[2], 'ep', s[3], 't', now,
                                 'n', s[7], 'x', 'review accepted', 'op', ARGV[1]})
  moved = s[7]
end
return op_record(saga, ARGV[1], {RC.OK, cleared, moved}, 'review_op')

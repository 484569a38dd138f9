-- accept_review: a person has checked a saga's flagged results and accepts them.
-- Clears every review flag (rv:<step>) of the saga, takes it out of the review
-- index and records who accepted it; the saga's state does not change. The next
-- run of a step (an operator's retry) may flag it again.
--
-- KEYS[1]  saga hash
-- KEYS[2]  history stream
-- KEYS[3]  sagas flagged for review (zset)
-- KEYS[4]  retired sagas (zset: "<user>|<record>" -> due ms; includes/retire)
-- ARGV[1]  operation id
-- ARGV[2]  history MAXLEN
-- ARGV[3]  who accepted, and why (free text)
-- ARGV[4]  retention per state (StateLimits.retention's table): a completed saga kept for
--          its review is kept from now on for the completed retention
-- ARGV[5..] the pipeline's step names (at most 32)
-- Returns: {RC.OK, flags_cleared}
--          {RC.DUPLICATE, flags_cleared}    same op id: nothing written
--          {RC.NOT_FOUND}
--          {RC.WRONG_STATE, 'not_flagged'}  no step flagged the saga
-- Emits:   history 'reviewed'
--@include now
--@include history
--@include op
--@include retire

local saga, hist, index = KEYS[1], KEYS[2], KEYS[3]
local replay = op_replay(saga, ARGV[1], 'review_op')
if replay then return replay end
local s = redis.call('HMGET', saga, 'state', 'step', 'epoch', 'rid', 'uid')
if not s[1] then return {RC.NOT_FOUND} end
local cleared = 0
for i = 5, 36 do
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
return op_record(saga, ARGV[1], {RC.OK, cleared}, 'review_op')

-- promote_retries: move due retries of one step back to its ready stream.
-- Python reads the earliest candidates (ZRANGE) and passes their keys; this
-- script re-checks each one's due time against Redis TIME and its state, so a
-- candidate that is not due, or was retried or cancelled meanwhile, is skipped.
-- An undo step's retry (a compensating saga with no lease) stays 'compensating'.
--
-- KEYS[1]  delayed retries of the step (zset: record -> due ms)
-- KEYS[2]  ready stream of the step
-- KEYS[3..8] state indexes, in SagaState order
-- KEYS[9+2(i-1)], KEYS[10+2(i-1)]  saga hash and history of candidate i
-- ARGV[1]  step name
-- ARGV[2]  operation id
-- ARGV[3]  history MAXLEN
-- ARGV[4..] candidate record ids, at most 100
-- Returns: {RC.OK, promoted, not_yet_due}
-- Emits:   ready entry {rid, ep, v} and history 'promoted' per promoted saga
--@include now
--@include history
--@include state_index
--@include lanes

local delayed, ready = KEYS[1], KEYS[2]
local step, op, maxlen = ARGV[1], ARGV[2], ARGV[3]
local n = #ARGV - 3
if n > 100 then return redis.error_reply('promote_retries: at most 100 candidates per call') end
local now = now_ms()
local promoted, waiting = 0, 0

for i = 1, n do
  local record = ARGV[3 + i]
  local saga, hist = KEYS[9 + 2 * (i - 1)], KEYS[10 + 2 * (i - 1)]
  local due = redis.call('ZSCORE', delayed, record)
  if due and tonumber(due) > now then
    waiting = waiting + 1
  elseif due then
    local s = redis.call('HMGET', saga, 'state', 'step', 'epoch', 'token', 'sect', 'ls@' .. step)
    local undo = s[1] == STATE.COMPENSATING and (s[4] or '') == ''
    if s[6] == STATE.WAITING_RETRY and lane_live(s[1], s[5], s[3]) then
      -- a lane's retry (includes/lanes): the saga runs on, the lane is pending again
      local entry = redis.call('XADD', ready, '*', 'rid', record, 'ep', s[3], 'v', SCHEMA_VERSION)
      redis.call('HSET', saga, 'ls@' .. step, STATE.PENDING, 'le@' .. step, entry, 'updated', now)
      history_append(hist, maxlen, {'e', 'promoted', 's', step, 'ep', s[3], 't', now, 'op', op})
      promoted = promoted + 1
    elseif (s[1] == STATE.WAITING_RETRY or undo) and s[2] == step then
      local entry = redis.call('XADD', ready, '*', 'rid', record, 'ep', s[3], 'v', SCHEMA_VERSION)
      local to = STATE.PENDING
      if undo then to = STATE.COMPENSATING end
      redis.call('HSET', saga, 'state', to, 'entry', entry, 'due', 0, 'updated', now)
      index_state(3, record, s[1], to, now)
      history_append(hist, maxlen, {'e', 'promoted', 's', step, 'ep', s[3], 't', now, 'op', op})
      promoted = promoted + 1
    end
    redis.call('ZREM', delayed, record)
  end
end
return {RC.OK, promoted, waiting}

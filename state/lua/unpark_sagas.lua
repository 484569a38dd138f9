-- unpark_sagas: wake sagas parked for a reason that no longer holds (a user's budget
-- was raised or cleared): each named saga still waiting at the step with the given
-- error class goes back to the step's ready stream now, not at its due time. An undo
-- step parked while compensating (its reason in 'pec', fail_undo) wakes the same way
-- and stays compensating.
-- Python reads the candidates (the user's index) and passes their keys; this script
-- re-checks each one, so a saga retried, cancelled or promoted meanwhile is skipped.
--
-- KEYS[1]  delayed retries of the step (zset: record -> due ms)
-- KEYS[2]  ready stream of the step
-- KEYS[3..8] state indexes, in SagaState order
-- KEYS[9+2(i-1)], KEYS[10+2(i-1)]  saga hash and history of candidate i
-- ARGV[1]  step name
-- ARGV[2]  operation id
-- ARGV[3]  history MAXLEN
-- ARGV[4]  error class the saga was parked with (e.g. BudgetExceededError)
-- ARGV[5]  why it wakes (history detail, e.g. "budget raised")
-- ARGV[6..] candidate record ids, at most 100
-- Returns: {RC.OK, woken}
-- Emits:   ready entry {rid, ep, v} and history 'promoted' (with x = ARGV[5]) per woken saga
--@include now
--@include history
--@include state_index

local delayed, ready = KEYS[1], KEYS[2]
local step, op, maxlen, ec, why = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local n = #ARGV - 5
if n > 100 then return redis.error_reply('unpark_sagas: at most 100 candidates per call') end
local now = now_ms()
local woken = 0

for i = 1, n do
  local record = ARGV[5 + i]
  local saga, hist = KEYS[9 + 2 * (i - 1)], KEYS[10 + 2 * (i - 1)]
  local s = redis.call('HMGET', saga, 'state', 'step', 'epoch', 'ec', 'pec')
  local parked = s[1] == STATE.WAITING_RETRY and s[4] == ec
  local undo = s[1] == STATE.COMPENSATING and s[5] == ec
  if (parked or undo) and s[2] == step and redis.call('ZREM', delayed, record) == 1 then
    local entry = redis.call('XADD', ready, '*', 'rid', record, 'ep', s[3], 'v', SCHEMA_VERSION)
    if undo then
      redis.call('HSET', saga, 'entry', entry, 'due', 0, 'updated', now, 'pec', '')
    else
      redis.call('HSET', saga, 'state', STATE.PENDING, 'entry', entry, 'due', 0, 'updated', now)
      index_state(3, record, STATE.WAITING_RETRY, STATE.PENDING, now)
    end
    history_append(hist, maxlen, {'e', 'promoted', 's', step, 'ep', s[3], 't', now, 'x', why,
                                  'op', op})
    woken = woken + 1
  end
end
return {RC.OK, woken}

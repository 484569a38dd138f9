-- cancel_saga: stop a saga wherever it is. A running attempt is fenced out
-- (its token is cleared) and its entry acknowledged; a waiting retry, a
-- dead letter, or a wait's or a run-next-at's timer (the partition's waits) is removed. The user's slot it held at the step (per-user cap: a running
-- attempt, or a released entry's reservation) goes to the user's oldest deferred entry
-- at once, not when its lease runs out. Cancelling a cancelled saga changes nothing.
--
-- KEYS[1]  saga hash
-- KEYS[2]  history stream
-- KEYS[3]  ready stream of the current step
-- KEYS[4]  delayed retries of the current step
-- KEYS[5]  dead-letter stream of the current step
-- KEYS[6]  users' slots of the current step        {p}:inflight:<step>  (includes/user_cap)
-- KEYS[7]  entries deferred by the user cap there  {p}:deferred:<step>
-- KEYS[8..13] state indexes, in SagaState order
-- KEYS[14] retired sagas (zset: "<user>|<record>" -> due ms; includes/retire)
-- KEYS[15] the partition's waits   {p}:waits  (its timer, if any, leaves at once)
-- ARGV[1]  the current step as the caller read it (guards KEYS[3..7])
-- ARGV[2]  consumer group
-- ARGV[3]  operation id
-- ARGV[4]  history MAXLEN
-- ARGV[5]  who asked, and why (free text)
-- ARGV[6]  retention per state (StateLimits.retention's table): a cancelled saga's starts
-- Returns: {RC.OK, previous_state}
--          {RC.DUPLICATE, state}             already cancelled
--          {RC.NOT_FOUND}
--          {RC.WRONG_STATE, reason, detail}  completed or compensated, or the current
--                                            step moved
-- Emits:   history 'cancelled' (when an attempt was running: its number, worker and claim
--          time as 'pa', 'pw', 'pt', so the timeline still draws the attempt it fenced
--          out); a ready entry {rid, ep, v} for a deferred entry its slot went to
--@include now
--@include history
--@include state_index
--@include user_cap
--@include retire

local saga, hist = KEYS[1], KEYS[2]
local s = redis.call('HMGET', saga, 'state', 'step', 'entry', 'dead_id', 'rid', 'epoch', 'uid',
                     'worker', 'claimed', 'att:' .. ARGV[1])
if not s[1] then return {RC.NOT_FOUND} end
if s[1] == STATE.CANCELLED then return {RC.DUPLICATE, s[1]} end
if s[1] == STATE.COMPLETED or s[1] == STATE.COMPENSATED then
  return {RC.WRONG_STATE, s[1], s[2]}
end
if s[2] ~= ARGV[1] then return {RC.WRONG_STATE, 'step_moved', s[2]} end

local now, record = now_ms(), s[5]
if s[3] and s[3] ~= '' then redis.call('XACK', KEYS[3], ARGV[2], s[3]) end
redis.call('ZREM', KEYS[4], record)
if s[1] == STATE.WAITING then
  redis.call('ZREM', KEYS[15], record)
  redis.call('HDEL', saga, 'wev', 'wdue', 'wnext', 'wto', 'wdef', 'wundo', 'wtok', 'wgate')
end
if s[4] and s[4] ~= '' then redis.call('XDEL', KEYS[5], s[4]) end
free_slot({inflight = KEYS[6], deferred = KEYS[7], ready = KEYS[3]}, s[7], record, now)
redis.call('HSET', saga, 'state', STATE.CANCELLED, 'token', '', 'lease', 0, 'worker', '',
           'entry', '', 'due', 0, 'dead_id', '', 'updated', now, 'op', ARGV[3])
index_state(8, record, s[1], STATE.CANCELLED, now)
retire({saga = saga, retired = KEYS[14]}, s[7], record, now, ARGV[6], STATE.CANCELLED)
local ev = {'e', 'cancelled', 's', s[2], 'ep', s[6], 't', now, 'x', ARGV[5], 'op', ARGV[3]}
if s[1] == STATE.RUNNING and s[9] and s[9] ~= '' then
  -- 'att:<step>' is '<epoch>:<attempts>': the running attempt is the last one counted
  local att = string.match(s[10] or '', ':(%d+)$') or '0'
  ev[#ev + 1] = 'pa'; ev[#ev + 1] = att
  ev[#ev + 1] = 'pw'; ev[#ev + 1] = s[8] or ''
  ev[#ev + 1] = 'pt'; ev[#ev + 1] = s[9]
end
history_append(hist, ARGV[4], ev)
return {RC.OK, s[1]}

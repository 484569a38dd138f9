-- compensate_saga: undo what a saga committed, latest step first. Used by
-- `saga cancel --compensate` (any state but completed), by a worker whose claim
-- dead-lettered a saga after too many lost leases, and by `saga retry` of a
-- compensation_failed saga (the undos not yet done run again, in a new epoch).
-- Like cancel, a running attempt is fenced out (its token is cleared) and the current
-- entry, waiting retry, dead letter or timer (a wait's, a run-next-at's) is removed, and the user's slot it held at the
-- step (per-user cap) goes to the user's oldest deferred entry at once; then the plan is
-- the steps of ARGV[7..] whose output is stored, and the first undo is enqueued.
--
-- KEYS[1]  saga hash
-- KEYS[2]  history stream
-- KEYS[3]  ready stream of the current step (its entry is acknowledged)
-- KEYS[4]  delayed retries of the current step
-- KEYS[5]  dead-letter stream of the current step
-- KEYS[6]  users' slots of the current step        {p}:inflight:<step>  (includes/user_cap)
-- KEYS[7]  entries deferred by the user cap there  {p}:deferred:<step>
-- KEYS[8..13] state indexes, in keys.INDEXED order
-- KEYS[14..13+n] undo ready streams of ARGV[7..6+n], in that order
-- KEYS[14+n] retired sagas (zset: "<user>|<record>" -> due ms; includes/retire): a saga
--          that had ended is no longer due; one compensated at once starts its retention
-- KEYS[15+n] the partition's waits   {p}:waits  (its timer, if any, leaves at once)
-- ARGV[1]  the current step as the caller read it (guards KEYS[3..7])
-- ARGV[2]  consumer group
-- ARGV[3]  operation id
-- ARGV[4]  history MAXLEN
-- ARGV[5]  who asked, and why (free text)
-- ARGV[6]  n: number of steps with a compensation, at most 32
-- ARGV[7..6+n] those steps, latest in the pipeline first
-- ARGV[7+n] retention per state (StateLimits.retention's table)
-- Returns: {RC.OK, state, step, entry}       compensating (or compensated: nothing to undo)
--          {RC.DUPLICATE, state, step, entry}  same op id, or already compensating or
--                                              compensated: nothing written
--          {RC.NOT_FOUND}
--          {RC.WRONG_STATE, reason, detail}  completed, or the current step moved
-- Emits:   history 'compensating'; an undo ready entry {rid, ep, v}; a ready entry of the
--          current step for a deferred entry its slot went to
--@include now
--@include history
--@include state_index
--@include op
--@include retire
--@include undo_plan
--@include user_cap

local saga, hist = KEYS[1], KEYS[2]
local expected, group, op, maxlen = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local replay = op_replay(saga, op, 'cmp_op')
if replay then return replay end
local s = redis.call('HMGET', saga, 'state', 'step', 'entry', 'dead_id', 'rid', 'epoch', 'uid')
if not s[1] then return {RC.NOT_FOUND} end
if s[1] == STATE.COMPENSATING or s[1] == STATE.COMPENSATED then
  return {RC.DUPLICATE, s[1], s[2], s[3] or ''}
end
if s[1] == STATE.COMPLETED then return {RC.WRONG_STATE, STATE.COMPLETED, s[2]} end
if s[2] ~= expected then return {RC.WRONG_STATE, 'step_moved', s[2]} end
local n = tonumber(ARGV[6])
if n > 32 then return redis.error_reply('compensate_saga: at most 32 steps') end

local now, record = now_ms(), s[5]
if s[3] and s[3] ~= '' then redis.call('XACK', KEYS[3], group, s[3]) end
redis.call('ZREM', KEYS[4], record)
if s[1] == STATE.WAITING then
  redis.call('ZREM', KEYS[15 + n], record)
  redis.call('HDEL', saga, 'wev', 'wdue', 'wnext', 'wto', 'wdef', 'wundo', 'wtok', 'wgate')
end
if s[4] and s[4] ~= '' then redis.call('XDEL', KEYS[5], s[4]) end
free_slot({inflight = KEYS[6], deferred = KEYS[7], ready = KEYS[3]}, s[7], record, now)
local plan, head = undo_plan(saga, 6, n)
local state, step, entry = begin_undo({saga = saga, hist = hist, ready_at = 14, index_at = 8,
                                       record = record, from = s[1], step = s[2],
                                       epoch = tonumber(s[6]), now = now, maxlen = maxlen,
                                       op = op, why = 'from ' .. s[1] .. ' at ' .. s[2] ..
                                       ' by ' .. ARGV[5], retired = KEYS[14 + n],
                                       user = s[7], ret = ARGV[7 + n]}, plan, head)
return op_record(saga, op, {RC.OK, state, step, entry}, 'cmp_op')

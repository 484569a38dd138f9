-- retry_saga: an operator re-runs a saga from a step, keeping all its history.
-- Bumps the epoch, so any executor still running an older attempt is fenced
-- out; attempts restart from zero in the new epoch. Refused while the step
-- runs under a live lease unless forced. The user's slot the saga held at its current
-- step (per-user cap) goes to the user's oldest deferred entry there at once.
--
-- KEYS[1]  saga hash
-- KEYS[2]  history stream
-- KEYS[3]  ready stream of the step to re-run from
-- KEYS[4]  ready stream of the saga's current step (its entry is acknowledged)
-- KEYS[5]  delayed retries of the current step
-- KEYS[6]  dead-letter stream of the current step
-- KEYS[7]  users' slots of the current step        {p}:inflight:<step>  (includes/user_cap)
-- KEYS[8]  entries deferred by the user cap there  {p}:deferred:<step>
-- KEYS[9..14] state indexes, in SagaState order
-- KEYS[15] sagas flagged for review
-- ARGV[1]  step to re-run from
-- ARGV[2]  the step before it, whose output is its input ("_input" for the first step)
-- ARGV[3]  the current step as the caller read it (guards KEYS[4..8])
-- ARGV[4]  "1" to force while a lease is live
-- ARGV[5]  consumer group
-- ARGV[6]  operation id
-- ARGV[7]  history MAXLEN
-- ARGV[8]  who asked (free text, e.g. "cli root@host")
-- ARGV[9]  n: how many of the following steps re-run (their review flags are cleared)
-- ARGV[10..9+n] the steps that re-run; ARGV[10+n..] the steps before them (their flags
--          stay; the record leaves KEYS[15] when none is left). At most 32 in all.
-- Returns: {RC.OK, epoch, entry}
--          {RC.DUPLICATE, epoch, entry}       same op id: nothing written
--          {RC.NOT_FOUND}
--          {RC.WRONG_STATE, reason, detail}   current step moved, no input for the step,
--                                             or compensating (undos run: cancel first)
--          {RC.BUSY, worker}                  running under a live lease and not forced
-- Emits:   ready entry {rid, ep, v}; history 'retried'; a ready entry of the current step
--          for a deferred entry its slot went to
--@include now
--@include history
--@include state_index
--@include op
--@include review
--@include user_cap

local saga, hist = KEYS[1], KEYS[2]
local from, prev, expected, force = ARGV[1], ARGV[2], ARGV[3], ARGV[4] == '1'
local group, op, maxlen = ARGV[5], ARGV[6], ARGV[7]

-- Its own op slot: executors claim the new entry (writing 'op') before a resend arrives.
local replay = op_replay(saga, op, 'retry_op')
if replay then return replay end
local s = redis.call('HMGET', saga, 'state', 'step', 'epoch', 'entry', 'lease', 'worker',
                     'dead_id', 'rid', 'uid')
if not s[1] then return {RC.NOT_FOUND} end
if s[2] ~= expected then return {RC.WRONG_STATE, 'step_moved', s[2]} end
if s[1] == STATE.COMPENSATING then return {RC.WRONG_STATE, STATE.COMPENSATING, s[2]} end
if redis.call('HEXISTS', saga, 'out:' .. prev) == 0 then
  return {RC.WRONG_STATE, 'missing_input', prev}
end
local now = now_ms()
if s[1] == STATE.RUNNING and tonumber(s[5]) > now and not force then
  return {RC.BUSY, s[6]}
end

local record = s[8]
local epoch = tonumber(s[3]) + 1
if s[4] and s[4] ~= '' then redis.call('XACK', KEYS[4], group, s[4]) end
redis.call('ZREM', KEYS[5], record)
if s[7] and s[7] ~= '' then redis.call('XDEL', KEYS[6], s[7]) end
free_slot({inflight = KEYS[7], deferred = KEYS[8], ready = KEYS[4]}, s[9], record, now)
local entry = redis.call('XADD', KEYS[3], '*', 'rid', record, 'ep', epoch, 'v', SCHEMA_VERSION)
redis.call('HSET', saga, 'state', STATE.PENDING, 'step', from, 'prev', prev, 'epoch', epoch,
           'token', '', 'lease', 0, 'worker', '', 'entry', entry, 'due', 0, 'dead_id', '',
           'updated', now, 'ret', '')
-- Alive again: no longer deleted at its retention's end ('ret', or the TTL an earlier
-- release set at completion).
redis.call('PERSIST', saga)
redis.call('PERSIST', hist)
index_state(9, record, s[1], STATE.PENDING, now)
clear_reviews(saga, KEYS[15], record, 9)
local why = 'from ' .. s[1] .. ' at ' .. s[2] .. ' by ' .. ARGV[8]
if force then why = why .. ' (forced)' end
history_append(hist, maxlen, {'e', 'retried', 's', from, 'ep', epoch, 't', now, 'x', why,
                              'op', op})
return op_record(saga, op, {RC.OK, epoch, entry}, 'retry_op')

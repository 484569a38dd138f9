-- time_out_wait: a parked saga's timer is due (by the server's clock): take the wait's
-- declared path. 'default' (a wait's default) and 'continue' (a sleep: its input passed
-- through) end the wait as a signal would; 'fail' dead-letters the saga at the wait step;
-- 'compensate' starts compensation of its committed steps (or ends compensated when none
-- needs undoing); 'resume' (a committed step's "run the next step at", commit_steps and
-- includes/next_at) adds the next step's ready entry. One record per call: the sweep sends many in one round trip. A member
-- whose saga no longer waits (signalled, cancelled, retried, deleted) is only removed.
--
-- KEYS[1]  saga hash
-- KEYS[2]  history stream
-- KEYS[3]  the partition's waits   {p}:waits
-- KEYS[4]  ready stream of the step after the wait (as the caller read 'wnext')
-- KEYS[5]  dead-letter stream of the wait step
-- KEYS[6]  partition counters   {p}:stats
-- KEYS[7..12] state indexes, in SagaState order
-- KEYS[13] retired sagas (zset: "<user>|<record>" -> due ms; includes/retire)
-- KEYS[14..13+n] undo ready streams of ARGV[7..6+n], in that order
-- ARGV[1]  record id
-- ARGV[2]  the step after the wait as the caller read it ('wnext')
-- ARGV[3]  operation id
-- ARGV[4]  history MAXLEN
-- ARGV[5]  retention per state (StateLimits.retention's table)
-- ARGV[6]  n: steps to undo ('wundo' as the caller read it), at most 32
-- ARGV[7..6+n] those steps, latest first
-- Returns: {RC.OK, state, path}          the path taken: default | continue | fail |
--                                        compensate | resume
--          {RC.OK, state, 'not_due'}     its timer is later (left in the set)
--          {RC.OK, state, 'gone'}        not waiting any more: the member was removed
--          {RC.WRONG_STATE, state, 'step_moved'}  'wnext' or 'wundo' differ from the
--                                        caller's: read again
-- Emits:   history 'timer_fired' and a ready entry {rid, ep, v} (resume); else
--          history 'wait_timed_out' (x: the path), then as each path does: ready entry
--          {rid, ep, v}; a dead letter; 'compensating' and an undo ready entry
--@include now
--@include history
--@include state_index
--@include retire
--@include dead_letter
--@include undo_plan
--@include wait

local saga, hist, waits, next_ready = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local record, op, maxlen, ret = ARGV[1], ARGV[3], ARGV[4], ARGV[5]
local n_undo = tonumber(ARGV[6]) or 0
if n_undo > 32 then return redis.error_reply('time_out_wait: at most 32 steps to undo') end

local now = now_ms()
local due = tonumber(redis.call('ZSCORE', waits, record))
if not due then return {RC.OK, '', 'gone'} end
local s = redis.call('HMGET', saga, 'state', 'step', 'epoch', 'uid', 'wdue', 'wnext', 'wto',
                     'wdef', 'wtok', 'prev', 'wundo', 'wev', 'wgate')
if s[1] ~= STATE.WAITING or tonumber(s[5] or '0') == 0 then
  redis.call('ZREM', waits, record)
  return {RC.OK, s[1] or '', 'gone'}
end
if tonumber(s[5]) > now or due > now then return {RC.OK, s[1], 'not_due'} end
local undo = {}
for i = 1, 32 do
  if i > n_undo then break end
  undo[i] = ARGV[6 + i]
end
if s[6] ~= ARGV[2] or (s[11] or '') ~= table.concat(undo, ',') then
  return {RC.WRONG_STATE, s[1], 'step_moved'}
end

local step, epoch, user, path = s[2], s[3], s[4], s[7]
redis.call('ZREM', waits, record)
if path == 'resume' then  -- the step to run is already the saga's; only its entry is due
  local entry = redis.call('XADD', next_ready, '*', 'rid', record, 'ep', epoch,
                           'v', SCHEMA_VERSION)
  redis.call('HSET', saga, 'state', STATE.PENDING, 'entry', entry, 'due', 0, 'updated', now,
             'op', op)
  redis.call('HDEL', saga, 'wev', 'wdue', 'wnext', 'wto', 'wdef', 'wundo', 'wtok', 'wgate')
  index_state(7, record, STATE.WAITING, STATE.PENDING, now)
  history_append(hist, maxlen, {'e', 'timer_fired', 's', step, 'ep', epoch, 't', now,
                                'due', s[5], 'op', op})
  return {RC.OK, STATE.PENDING, path}
end
local go_on = path == 'default' or path == 'continue'
local ev = {'e', 'wait_timed_out', 's', step, 'ep', epoch, 't', now, 'x', path, 'op', op}
if go_on then
  ev[#ev + 1] = 'n'
  ev[#ev + 1] = s[6]
end
history_append(hist, maxlen, ev)
if go_on then
  local out = s[8] or '{}'
  if path == 'continue' then
    out = redis.call('HGET', saga, 'out:' .. (s[10] or '_input')) or '{}'
  end
  end_wait({saga = saga, next_ready = next_ready, record = record, step = step,
            next_step = s[6], epoch = epoch, token = s[9] or '', now = now, op = op,
            from = STATE.WAITING, index_at = 7}, out)
  return {RC.OK, STATE.PENDING, path}
end
redis.call('HDEL', saga, 'wev', 'wdue', 'wnext', 'wto', 'wdef', 'wundo', 'wtok', 'wgate')
redis.call('HSET', saga, 'due', 0)
local em = 'no ' .. (s[12] or '') .. ' signal before the wait timed out'
if s[13] == '1' then em = 'no review accepted before the gate timed out' end
if path == 'compensate' then
  local plan, head = undo_plan(saga, 6, n_undo)
  local state = begin_undo({saga = saga, hist = hist, ready_at = 14, index_at = 7,
    record = record, from = STATE.WAITING, step = step, epoch = tonumber(epoch), now = now,
    maxlen = maxlen, op = op, why = em, retired = KEYS[13], user = user, ret = ret},
    plan, head)
  return {RC.OK, state, path}
end
dead_letter({saga = saga, dead = KEYS[5], stats = KEYS[6], first_index = 7,
             retired = KEYS[13]},
            {record = record, user = user, step = step, attempt = 0, epoch = epoch,
             from = STATE.WAITING, ec = 'WaitTimeoutError', em = em, now = now, ret = ret})
history_append(hist, maxlen, {'e', 'dead_lettered', 's', step, 'ep', epoch, 't', now,
                              'ec', 'WaitTimeoutError', 'em', em, 'op', op})
return {RC.OK, STATE.FAILED, path}

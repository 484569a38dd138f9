-- decide_review: a person decides one item of a saga's flagged step (accept, correct,
-- reject or add a value). The caller read the saga's review at version ARGV[4] and
-- built the new decisions from it; a decision made meanwhile by another reviewer
-- bumped the version, and this one is refused (CONFLICT) rather than overwriting it.
-- The decision that leaves nothing undecided completes the review: the reviewed
-- output replaces the step's output (the machine's original is kept at orig:<step>
-- and in the history event), the step's flag is cleared, and the steps after it
-- re-run on the reviewed values in a new epoch (as retry_saga does). The saga has
-- completed, or waits at a review gate (park_wait, 'wgate'): its wait ends (its timer
-- goes) and the steps after the reviewed one, the gate among them, run again; the gate
-- lets it on unless a re-run step flags it again.
--
-- KEYS[1]  saga hash
-- KEYS[2]  history stream
-- KEYS[3]  sagas flagged for review (zset)
-- KEYS[4]  ready stream of the step after the reviewed one (unused without ARGV[11])
-- KEYS[5..10] state indexes, in SagaState order
-- KEYS[11] retired sagas (zset: "<user>|<record>" -> due ms; includes/retire)
-- KEYS[12] the partition's waits   {p}:waits (a gated saga's timer leaves it)
-- ARGV[1]  operation id
-- ARGV[2]  history MAXLEN
-- ARGV[3]  who decided (free text, e.g. "console alice")
-- ARGV[4]  the review version the caller read (field 'rvv'; absent reads 0)
-- ARGV[5]  the reviewed step (its flag rv:<step> must be set)
-- ARGV[6]  the decision's summary for history, e.g. "correct b3" (no values in it)
-- ARGV[7]  every decision so far, this one included (opaque, sealed by the caller):
--          written to rvd:<step>
-- ARGV[8]  this decision with the old and the new value (opaque, sealed): the
--          history event's 'rvd'
-- ARGV[9]  "1" when this decision completes the review
-- ARGV[10] completing: the reviewed output (opaque, sealed), the new out:<step>
-- ARGV[11] completing: the step that re-runs on it ("" for none: the saga stays completed)
-- ARGV[12] retention per state (StateLimits.retention's table): a completed saga kept for
--          its review, whose review this completes with nothing re-run and no flag left,
--          is kept from now on for the completed retention
-- ARGV[13] n: how many of the following steps re-run (their review flags are cleared)
-- ARGV[14..13+n] the steps that re-run; ARGV[14+n..] the steps before them (their
--          flags stay; the record leaves KEYS[3] when none is left). At most 32 in all.
-- Returns: {RC.OK, version, epoch, entry}         entry "" unless a step re-runs
--          {RC.DUPLICATE, version, epoch, entry}  same op id: nothing written
--          {RC.NOT_FOUND}
--          {RC.WRONG_STATE, 'not_flagged'}        the step is not flagged for review
--          {RC.WRONG_STATE, state}                the saga has not completed nor waits
--                                                 at a review gate
--          {RC.CONFLICT, version}                 another decision came first (version now)
-- Emits:   history 'review_decided' {s: current step, rs: reviewed step, x, rvd, rvv};
--          completing: history 'review_completed' {s: the step that re-runs (else the
--          current one), ep: its epoch, rs, n, orig}, a ready entry {rid, ep, v} of ARGV[11]
--@include now
--@include history
--@include state_index
--@include op
--@include retire

local saga, hist, index = KEYS[1], KEYS[2], KEYS[3]
local op, maxlen, who, step = ARGV[1], ARGV[2], ARGV[3], ARGV[5]
local replay = op_replay(saga, op, 'rvd_op')
if replay then return replay end
local s = redis.call('HMGET', saga, 'state', 'epoch', 'rid', 'rvv', 'rv:' .. step, 'step', 'uid',
                     'wgate')
if not s[1] then return {RC.NOT_FOUND} end
if not s[5] then return {RC.WRONG_STATE, 'not_flagged'} end
local gated = s[1] == STATE.WAITING and s[8] == '1'
if s[1] ~= STATE.COMPLETED and not gated then return {RC.WRONG_STATE, s[1]} end
if gated and ARGV[9] == '1' and ARGV[11] == '' then  -- the gate itself comes after
  return redis.error_reply('decide_review: a gated saga re-runs the steps after the reviewed one')
end
local version = tonumber(s[4]) or 0
if version ~= tonumber(ARGV[4]) then return {RC.CONFLICT, version} end

local now, record, epoch = now_ms(), s[3], tonumber(s[2])
version = version + 1
redis.call('HSET', saga, 'rvd:' .. step, ARGV[7], 'rvv', version, 'updated', now)
history_append(hist, maxlen, {'e', 'review_decided', 's', s[6], 'rs', step, 'ep', epoch, 't', now,
                              'x', ARGV[6] .. ' by ' .. who, 'rvd', ARGV[8], 'rvv', version,
                              'op', op})
local entry = ''
if ARGV[9] == '1' then
  local original = redis.call('HGET', saga, 'out:' .. step) or ''
  redis.call('HSET', saga, 'orig:' .. step, original, 'out:' .. step, ARGV[10])
  redis.call('HDEL', saga, 'rv:' .. step)
  local nxt, at = ARGV[11], s[6]
  if nxt ~= '' then
    at = nxt
    epoch = epoch + 1
    entry = redis.call('XADD', KEYS[4], '*', 'rid', record, 'ep', epoch, 'v', SCHEMA_VERSION)
    redis.call('HSET', saga, 'state', STATE.PENDING, 'step', nxt, 'prev', step, 'epoch', epoch,
               'token', '', 'lease', 0, 'worker', '', 'entry', entry, 'due', 0,
               'dead_id', '', 'ret', '')
    -- Alive again: no longer deleted at its retention's end (as retry_saga).
    redis.call('PERSIST', saga)
    redis.call('PERSIST', hist)
    if gated then
      redis.call('HDEL', saga, 'wev', 'wdue', 'wnext', 'wto', 'wdef', 'wundo', 'wtok', 'wgate')
      redis.call('ZREM', KEYS[12], record)
    end
    index_state(5, record, s[1], STATE.PENDING, now)
  end
  -- The re-run steps' flags go (they run again); the record leaves the index when no
  -- step is flagged any more (the reviewed step's flag is gone already).
  local n, left = tonumber(ARGV[13]) or 0, false
  for i = 1, 32 do
    local name = ARGV[13 + i]
    if not name then break end
    if i <= n then
      redis.call('HDEL', saga, 'rv:' .. name)
    elseif redis.call('HEXISTS', saga, 'rv:' .. name) == 1 then
      left = true
    end
  end
  if not left then redis.call('ZREM', index, record) end
  if nxt == '' and not left then  -- reviewed: the completed retention from now
    retire({saga = saga, retired = KEYS[11]}, s[7], record, now, ARGV[12], STATE.COMPLETED)
  end
  local why = 'reviewed by ' .. who
  if nxt ~= '' then why = why .. '; ' .. nxt .. ' re-runs on the reviewed values' end
  history_append(hist, maxlen, {'e', 'review_completed', 's', at, 'rs', step, 'ep', epoch,
                                't', now,
                                'x', why, 'n', nxt, 'orig', original, 'op', op})
end
return op_record(saga, op, {RC.OK, version, epoch, entry}, 'rvd_op')

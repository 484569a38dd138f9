-- quarantine_entry: move a malformed ready entry aside with the reason, and
-- acknowledge it, so it can never crash or loop an executor and is never lost.
-- When the entry names a saga whose current entry it is, that saga would wait for it
-- forever, unseen: it is dead-lettered ('Quarantined'), visible and retryable (a
-- compensating saga waiting on an undo entry ends compensation_failed). A saga deferred
-- by the per-user cap (pending, no entry) waits on its released entry only if that entry
-- carries the saga's epoch ('ep', read from the stream for such a saga only); an entry
-- with no readable epoch is taken as its own (includes/user_cap stale_release).
--
-- KEYS[1]  ready stream the entry came from
-- KEYS[2]  quarantine stream of the partition
-- KEYS[3]  saga hash of the record the entry names (only with a valid record id)
-- KEYS[4]  its history stream
-- KEYS[5]  dead-letter stream of the step
-- KEYS[6]  partition counters
-- KEYS[7..12] state indexes, in SagaState order
-- KEYS[13] users' slots of the step      {p}:inflight:<step>  (includes/user_cap)
-- KEYS[14] entries deferred by the cap   {p}:deferred:<step>
-- KEYS[15] retired sagas (zset: "<user>|<record>" -> due ms; includes/retire)
-- ARGV[1]  consumer group
-- ARGV[2]  entry id
-- ARGV[3]  reason
-- ARGV[4]  the entry's raw fields, encoded (JSON with base64 for non-UTF-8)
-- ARGV[5]  step name (with KEYS[3..])
-- ARGV[6]  history MAXLEN (with KEYS[3..])
-- ARGV[7]  the record id (with KEYS[3..])
-- ARGV[8]  retention per state (StateLimits.retention's table; with KEYS[3..])
-- Returns: {RC.OK, quarantine_entry_id, dead_letter_id or ''}
--          {RC.DUPLICATE, ''}  the entry is not pending (any more): a re-sent call, or
--                              another executor quarantined it first; nothing written
-- Emits:   a quarantine entry {entry, stream, reason, raw, t}, once per entry; for a
--          saga stranded by it, a dead letter and history 'dead_lettered'; a ready entry
--          for a deferred entry a freed slot went to
-- With a record, the slot it holds at the step (per-user cap) is freed unless its saga
-- still runs there, as a claim frees a dropped entry's (a quarantined release's
-- reservation, or a dead-lettered saga's) and hands a live one on; a saga gone: the
-- record's slot (free_orphan_slot). The keys come always: empty without a cap.
--@include now
--@include history
--@include state_index
--@include attempts
--@include retire
--@include dead_letter
--@include user_cap

-- Idempotent without an op id: only a pending entry is quarantined, and quarantining
-- acknowledges it.
if #redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1) == 0 then
  return {RC.DUPLICATE, ''}
end
local now = now_ms()
local id = redis.call('XADD', KEYS[2], 'MAXLEN', '~', 10000, '*', 'entry', ARGV[2],
                      'stream', KEYS[1], 'reason', ARGV[3], 'raw', ARGV[4], 't', now)
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
local dead_id = ''
if #KEYS >= 15 then
  local step = ARGV[5]
  local s = redis.call('HMGET', KEYS[3], 'state', 'step', 'entry', 'uid', 'rid', 'epoch',
                       'att:' .. step)
  -- A pending saga with no entry was deferred by the user cap: a released entry of its
  -- epoch is its own (claim_steps takes it), so quarantining it strands the saga as well;
  -- one of an older epoch (the saga retried or deferred again since) is not. An entry
  -- whose epoch cannot be read (gone, or 'ep' missing or no number: often why it is
  -- quarantined) is taken as the saga's: failed visibly rather than left waiting unseen.
  local waits = s[2] == step and (s[3] == ARGV[2] or (s[3] == '' and s[1] == STATE.PENDING
                                   and not stale_release(KEYS[1], ARGV[2], s[6])))
  if waits and (s[1] == STATE.PENDING or s[1] == STATE.RUNNING
                or s[1] == STATE.COMPENSATING) then
    local to = STATE.FAILED
    if s[1] == STATE.COMPENSATING then to = STATE.COMPENSATION_FAILED end
    local epoch = tonumber(s[6])
    local attempt = attempts_of(s[7], epoch)
    local em = 'its queue entry ' .. ARGV[2] .. ' was quarantined: ' .. ARGV[3]
    dead_id = dead_letter({saga = KEYS[3], dead = KEYS[5], stats = KEYS[6], first_index = 7,
                           retired = KEYS[15]},
                          {record = s[5], user = s[4], step = step, attempt = attempt,
                           epoch = epoch, from = s[1], ec = 'Quarantined', em = em, now = now,
                           to = to, ret = ARGV[8]})
    history_append(KEYS[4], ARGV[6], {'e', 'dead_lettered', 's', step, 'a', attempt,
                                      'ep', epoch, 't', now, 'ec', 'Quarantined', 'em', em})
  end
  if not s[1] then
    free_orphan_slot({inflight = KEYS[13], deferred = KEYS[14], ready = KEYS[1]}, ARGV[7], now)
  elseif dead_id ~= '' or not (s[1] == STATE.RUNNING and s[2] == step) then
    free_slot({inflight = KEYS[13], deferred = KEYS[14], ready = KEYS[1]}, s[4], ARGV[7], now)
  end
end
return {RC.OK, id, dead_id}

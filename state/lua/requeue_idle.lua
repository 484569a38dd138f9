-- requeue_idle: put ready entries idle past the lease back in the stream as new
-- entries, so whatever reads the stream next (a worker, or one KEDA wakes for the
-- lag this raises) runs them. Used by the controller, which runs no step: unlike
-- recover_idle it takes no ownership (no consumer is made), and a worker's own
-- recovery (XAUTOCLAIM resets the idle time) or acknowledgement wins any race:
-- each entry is re-checked here as still pending and idle.
-- The saga's state is left alone: a running saga whose lease expired stays
-- running, so the claim of the new entry takes it over ('reclaimed') and applies
-- the same dead-letter rule as a worker's recovery. An undo step's entry is requeued the
-- same way for a compensating saga (its lease is in the same fields).
-- An entry dropped (stale, or its saga gone) frees the slot the per-user cap reserved
-- for it at this step, as a claim does (includes/user_cap): a released entry of an older
-- epoch would otherwise hold its user's slot until its term ends. The slot keys come
-- always (with no cap on the step they are empty: one ZSCORE per dropped entry).
--
-- KEYS[1]  ready stream of the step
-- KEYS[2]  quarantine stream of the partition
-- KEYS[3]  users' slots of the step      {p}:inflight:<step>  (includes/user_cap)
-- KEYS[4]  entries deferred by the cap   {p}:deferred:<step>
-- KEYS[4+i] saga hash of entry i
-- ARGV[1]  consumer group
-- ARGV[2]  minimum idle time (ms): the step's lease plus a margin
-- ARGV[3]  operation id
-- ARGV[4]  step name (entry ids are per stream: the saga must be at this step)
-- ARGV[5..] pairs (entry id, record id), at most 100 pairs
-- Returns: one reply per entry:
--   {RC.OK, entry, new_entry}       requeued: the old entry acknowledged, the saga points at the new
--   {RC.DUPLICATE, entry, new_entry} this op id requeued it already: nothing written
--   {RC.BUSY, entry}                no longer pending or idle (a worker took it): untouched
--   {RC.NOT_FOUND, entry}           no saga: entry quarantined and acknowledged; a slot
--                                  of the record at the step is freed
--   {RC.STALE_ENTRY, entry, state}  the saga no longer expects it (or it is a deferred
--                                  saga's release of an older epoch): acknowledged,
--                                  dropped; a slot its saga holds at this step without
--                                  running here is freed (free_slot)
--   {RC.LEASE_HELD, entry, worker}  the saga's lease is still live: left pending
--   {RC.SCHEMA_NEWER, entry}        the saga was written by a newer release: left pending
-- Emits:   a ready entry {rid, ep, v} per requeued saga; a quarantine entry per missing saga;
--          a ready entry for a deferred entry a freed slot went to
--@include now
--@include op
--@include schema
--@include user_cap
--@include lanes

local ready, quarantine = KEYS[1], KEYS[2]
local group, min_idle, op, step = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local n = math.floor((#ARGV - 4) / 2)
if n > 100 then return redis.error_reply('requeue_idle: at most 100 entries per call') end
local now = now_ms()
local replies = {}

for i = 1, n do
  local entry, record = ARGV[3 + 2 * i], ARGV[4 + 2 * i]
  local saga = KEYS[4 + i]
  local replay = op_replay(saga, op, 'rq')
  if replay then
    replies[i] = replay
  elseif #redis.call('XPENDING', ready, group, 'IDLE', min_idle, entry, entry, 1) == 0 then
    replies[i] = {RC.BUSY, entry}
  else
    local s = redis.call('HMGET', saga, 'v', 'state', 'step', 'entry', 'lease', 'epoch', 'worker',
                         'uid', 'sect', 'ls@' .. step, 'le@' .. step, 'll@' .. step, 'lw@' .. step)
    -- A lane's entry (includes/lanes): the same checks, on the lane's fields.
    local lane = s[11] == entry and lane_live(s[2], s[9], s[6])
    if lane then s[2], s[3], s[4], s[5], s[7] = s[10], step, s[11], s[12], s[13] end
    if not s[2] then
      redis.call('XADD', quarantine, 'MAXLEN', '~', 10000, '*', 'entry', entry, 'stream', ready,
                 'rid', record, 'reason', 'saga not found', 't', now)
      redis.call('XACK', ready, group, entry)
      free_orphan_slot({inflight = KEYS[3], deferred = KEYS[4], ready = ready}, record, now)
      replies[i] = {RC.NOT_FOUND, entry}
    elseif schema_newer(s[1]) then
      replies[i] = {RC.SCHEMA_NEWER, entry}
    -- (a pending saga with no entry was deferred by the user cap: the entry its release
    -- made is its own if of its epoch, as claim_steps takes it; dropping it would strand
    -- the saga)
    elseif (s[4] ~= entry and not (s[4] == '' and s[2] == STATE.PENDING)) or s[3] ~= step
           or (s[2] ~= STATE.PENDING and s[2] ~= STATE.RUNNING
               and s[2] ~= STATE.COMPENSATING)
           or (s[4] == '' and stale_release(ready, entry, s[6])) then
      redis.call('XACK', ready, group, entry)
      -- (the entry was pending: checked above, so this runs once; as in claim_steps, a
      -- running attempt's slot here stays its own)
      if not (s[2] == STATE.RUNNING and s[3] == step) then
        free_slot({inflight = KEYS[3], deferred = KEYS[4], ready = ready}, s[8], record, now)
      end
      replies[i] = {RC.STALE_ENTRY, entry, s[2]}
    elseif s[2] ~= STATE.PENDING and tonumber(s[5] or 0) > now then
      replies[i] = {RC.LEASE_HELD, entry, s[7] or ''}
    else
      -- 'rq': the entry it replaces (acknowledged below), so an outside count of
      -- enqueues can tell a replacement from a second entry
      local new = redis.call('XADD', ready, '*', 'rid', record, 'ep', s[6], 'v', SCHEMA_VERSION,
                             'rq', entry)
      if lane then
        redis.call('HSET', saga, 'le@' .. step, new)
      else
        redis.call('HSET', saga, 'entry', new)
      end
      redis.call('XACK', ready, group, entry)
      replies[i] = op_record(saga, op, {RC.OK, entry, new}, 'rq')
    end
  end
end
return replies

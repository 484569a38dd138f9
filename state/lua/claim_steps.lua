-- claim_steps: claim a batch of ready entries of one step, in one round trip.
-- For each entry: issue a lease (deadline from Redis TIME) and a fencing token
-- "<epoch>:<seq>", count the attempt, and return everything the step needs.
-- An expired lease of another executor is taken over ('reclaimed'); its late
-- commit will carry a stale token and be refused.
--
-- KEYS[1]  ready stream of the step    {p}:ready:<step>
-- KEYS[2]  quarantine stream           {p}:quarantine
-- KEYS[3]  dead-letter stream          {p}:dead:<step>
-- KEYS[4]  partition counters          {p}:stats
-- KEYS[5..10] state indexes, in SagaState order
-- KEYS[11] users' slots of the step       {p}:inflight:<step>  (see includes/user_cap)
-- KEYS[12] entries deferred by the cap    {p}:deferred:<step>
-- KEYS[13] retired sagas (zset: "<user>|<record>" -> due ms; includes/retire)
-- KEYS[14] urgent sagas at the step (zset: record -> enqueue ms; includes/lowered)
-- KEYS[15] lowered entries of the step (zset: "<record>|<epoch>" -> created ms)
-- KEYS[16..15+u] undo ready streams of the steps ARGV[13+n..12+n+u], in that order
-- KEYS[16+u+3(i-1)], KEYS[17+u+3(i-1)], KEYS[18+u+3(i-1)]  saga hash, history, pages of
--          entry i
-- ARGV[1]  consumer group
-- ARGV[2]  step name
-- ARGV[3]  worker (consumer) name
-- ARGV[4]  lease duration (ms)
-- ARGV[5]  operation id
-- ARGV[6]  history MAXLEN
-- ARGV[7]  "1" to return the pages blob
-- ARGV[8]  max lease expiries: the attempt whose lease expiry reaches it dead-letters the
--          saga (an executor that crashes on a record must not crash forever). Expiries
--          have their own budget ('lx:<step>'), apart from the failures' (max attempts,
--          decided in Python from attempt - expired): a worker killed on its last allowed
--          attempt, or a slow one whose lease lapsed, does not dead-letter a healthy saga.
-- ARGV[9]  the step whose output is this step's input, as the pipeline says ("" = unknown):
--          read with the saga's fields in one HMGET; the saga's own 'prev' decides
--          ('|<step>': this step is a lane, includes/lanes: its lease, token and entry
--          are the lane's fields, its input that step's output; no cap, no lowering)
-- ARGV[10] per-user cap: attempts of this step one user may hold at once in this
--          partition while other entries wait undelivered in the stream (the group's lag;
--          0: no cap, KEYS[11..12] untouched). An entry over it is deferred:
--          acknowledged, its saga stays pending with no entry, and it waits in KEYS[12]
--          until a slot of its user frees (commit/fail, or the saga cancelled, retried,
--          compensated) or the workers are idle (release_deferred); its new entry is then
--          accepted for the pending saga if it carries the saga's epoch ('ep': read from
--          the stream for such an entry only, so the usual claim costs no command more).
-- ARGV[11] n: number of extra saga fields to return (e.g. "ckpt:parser"), at most 32
-- ARGV[12..11+n] the extra field names
-- ARGV[12+n] u: number of steps with a compensation (0: none), at most 32
-- ARGV[13+n..12+n+u] those steps, latest in the pipeline first: a saga dead-lettered here
--          for its lease expiries enters 'compensating' instead when one has its output
--          stored, as fail_step's dead path does
-- ARGV[13+n+u] retention per state (StateLimits.retention's table): a dead letter's starts
-- ARGV[14+n+u] priority age bound (ms; 0: priorities off, KEYS[14..15] untouched): while
--          an urgent saga (priority > 0) waits at the step, a pending priority-0 entry of a
--          saga created less than this ago is lowered (set aside, reply DEFERRED); at the
--          end, lowered entries go back to the stream (includes/lowered)
-- then pairs (entry id, record id), one per entry, at most 100 pairs; or, claiming in
--   the read (includes/claim_read): '>', count (at most 100), the partition's key base: the
--   script reads the entries itself and names their sagas' keys from the base
-- Returns: one reply per entry (claiming in the read: {replies, entries left unclaimed}):
--   {RC.OK | RC.DUPLICATE, entry, record, user, attempt, epoch, token, lease_until_ms,
--    input, document, trace, created_ms, pages|nil, expired, extra_1..extra_n}
--    (expired: attempts at this step in this epoch that ended by lease expiry)
--   {RC.NOT_FOUND, entry, record}      no saga: entry quarantined and acknowledged; with
--                                      the cap on, a slot of the record at this step (a
--                                      released entry's reservation) is freed
--   {RC.STALE_ENTRY, entry, record, state}  superseded entry (or a released deferral of an
--                                      older epoch): acknowledged, dropped; with the cap
--                                      on, a slot its saga holds at this step without
--                                      running here is freed (includes/user_cap free_slot)
--   {RC.LEASE_HELD, entry, record, worker}  another live lease: left pending
--   {RC.SCHEMA_NEWER, entry, record}   written by a newer release: left pending
--   {RC.DEAD_LETTERED, entry, record, state}  the lease expiries reached their cap:
--                                      dead-lettered ('failed'), or 'compensating' (or
--                                      'compensated': nothing to undo after all, see ARGV)
--   {RC.DEFERRED, entry, record}       its user holds ARGV[10] slots: set aside in KEYS[12];
--                                      or lowered for an urgent saga: set aside in KEYS[15]
-- Emits: history 'reclaimed' (with the lost attempt: pa, pw, pt) or 'dead_lettered';
--        quarantine entry for a missing saga; dead letter after too many expired leases,
--        or (compensation) 'dead_lettered' (x = 'compensating'), 'compensating' and an undo
--        ready entry {rid, ep, v}; a ready entry for a deferred entry a freed slot went to,
--        and for each lowered entry released (includes/lowered).
--        A plain claim appends no event: the running attempt is in the saga hash
--        (worker, claimed, att:<step>), and its end event carries its duration (as
--        Temporal records an activity's start only once it ends); this saves an XADD,
--        ~12% of the server's CPU per transition (saga bench).
--@include now
--@include history
--@include state_index
--@include attempts
--@include schema
--@include retire
--@include dead_letter
--@include user_cap
--@include undo_plan
--@include lowered
--@include lanes
--@include claim_read

local ready, quarantine = KEYS[1], KEYS[2]
local group, step, worker = ARGV[1], ARGV[2], ARGV[3]
local lease_ms, op, maxlen = tonumber(ARGV[4]), ARGV[5], ARGV[6]
local want_pages = ARGV[7] == '1'
local max_expiries = tonumber(ARGV[8])
local guess = ARGV[9]
local cap = tonumber(ARGV[10])
local inflight, deferred = KEYS[11], KEYS[12]
local n_extra = tonumber(ARGV[11])
if n_extra > 32 then return redis.error_reply('claim_steps: at most 32 extra fields') end
local undo_at = 12 + n_extra  -- ARGV[undo_at] = u, the steps after it (undo_plan's layout)
local n_undo = tonumber(ARGV[undo_at])
if n_undo > 32 then return redis.error_reply('claim_steps: at most 32 steps to undo') end
local ret = ARGV[undo_at + n_undo + 1]
local boost = tonumber(ARGV[undo_at + n_undo + 2])
local first_pair = undo_at + n_undo + 3
-- Claiming in the read, the entries and their sagas' keys come from the script's own read.
local read, unclaimed = nil, nil
local n
if ARGV[first_pair] == '>' then
  read, unclaimed = read_entries(ready, group, worker, tonumber(ARGV[first_pair + 1]),
                                 ARGV[first_pair + 2])
  if read.err then return read end
  n = #read
else
  n = math.floor((#ARGV - first_pair + 1) / 2)
end
if n > 100 then return redis.error_reply('claim_steps: at most 100 entries per call') end
local retired = KEYS[13]
local urgent, lowered = KEYS[14], KEYS[15]
local first_saga_key = 16 + n_undo

local now = now_ms()
-- Numbers go to redis.call as strings made once: Lua turns a number argument into a
-- string with '%.14g' (glibc's float printing), several times a claim otherwise.
local now_s = string.format('%d', now)
local replies = {}

-- The saga's fields, by their place in `s` below. One HMGET reads what every claim needs
-- (the state, the input: the guessed previous step's output, and the extra fields); the
-- fields only a running saga's claim (a takeover, a re-sent batch) or a deferred one's
-- needs are read by a second HMGET then. Each field an HMGET names is a walk of the
-- hash's listpack (a missing one, the whole of it): five fewer on the usual claim.
local fields = {'v', 'uid', 'state', 'step', 'epoch', 'seq', 'token', 'lease', 'entry', 'worker',
                'doc', 'trace', 'created', 'op', 'att:' .. step, 'prev', 'out:' .. guess,
                'claimed', 'lx:' .. step, 'dfr', 'pri'}
local N_BASE = #fields
for j = 1, n_extra do fields[N_BASE + j] = ARGV[11 + j] end
local RARE = {7, 8, 10, 18, 20}  -- token, lease, worker, claimed, dfr
local is_rare = {[7] = true, [8] = true, [10] = true, [18] = true, [20] = true}
local rare = {fields[7], fields[8], fields[10], fields[18], fields[20]}
local hot, hot_at = {}, {}
for at = 1, 64 do  -- #fields: N_BASE + n_extra, at most 53
  if not fields[at] then break end
  if not is_rare[at] then
    hot[#hot + 1] = fields[at]
    hot_at[#hot] = at
  end
end
local function read_saga(saga)
  local got = redis.call('HMGET', saga, unpack(hot))
  local s = {}
  for j = 1, 64 do
    if not hot_at[j] then break end
    s[hot_at[j]] = got[j]
  end
  if s[2] and (s[3] == STATE.RUNNING or s[9] == '') then
    local more = redis.call('HMGET', saga, unpack(rare))
    for j = 1, 5 do s[RARE[j]] = more[j] end
  end
  return s
end

-- A lane's claim (ARGV[9] is '|<parent>', includes/lanes) reads the same places from the
-- lane's fields; its input is its parent's output, whatever committed last.
local lane_parent = nil
if string.byte(guess, 1) == 124 then lane_parent = string.sub(guess, 2) end
local lane_fields = {}
if lane_parent then
  for j = 1, 64 do lane_fields[j] = fields[j] end  -- #fields: 21 and n_extra (<= 32)
  local at = {[4] = 'sect', [7] = 'lt@', [8] = 'll@', [9] = 'le@', [10] = 'lw@', [14] = 'lo@',
              [16] = 'ls@', [18] = 'lc@', [20] = 'lanes'}
  for j = 1, 21 do
    local name = at[j]
    if name and string.sub(name, -1) == '@' then name = name .. step end
    if name then lane_fields[j] = name end
  end
  lane_fields[17] = 'out:' .. lane_parent
end

local function claim_data(code, saga, pages_key, entry, record, s, attempt, expired, token,
                          lease_until)
  local prev = s[16] or '_input'
  local input = s[17]
  if not lane_parent and prev ~= guess then input = redis.call('HGET', saga, 'out:' .. prev) end
  local pages = false
  if want_pages then pages = redis.call('GET', pages_key) or false end
  local reply = {code, entry, record, s[2], attempt, tonumber(s[5]), token, lease_until,
                 input or '', s[11] or '', s[12] or '', tonumber(s[13]), pages, expired}
  for j = 1, n_extra do reply[14 + j] = s[N_BASE + j] or '' end
  return reply
end

-- Slots in use per user, counted once per batch (see includes/user_cap).
local slots = {}
-- Whether entries wait undelivered behind this batch (the group's lag; unknown counts
-- as yes). With none, a user over the cap takes the slot: nobody is kept waiting, and a
-- user alone keeps the whole fleet busy without the round trip through deferral.
local backlog = nil
local function entries_waiting()
  if backlog == nil then
    backlog = true
    local groups = redis.call('XINFO', 'GROUPS', ready)
    for gi = 1, 64 do
      local g = groups[gi]
      if not g then break end
      local f = {}
      for j = 1, 40, 2 do
        if g[j] == nil then break end
        f[g[j]] = g[j + 1]
      end
      if f['name'] == group then backlog = not (f['lag'] == 0) end
    end
  end
  return backlog
end
local function over_cap(user, member)
  if cap <= 0 or redis.call('ZSCORE', inflight, member) then return false end
  if slots[user] == nil then slots[user] = user_slots(inflight, user, now, cap + 16) end
  return slots[user] >= cap and entries_waiting()
end

-- Urgent sagas waiting at the step: counted once (nil until a priority-0 entry asks),
-- then down by one for each of them this batch claims.
local waiting = nil
-- Whether this batch must put lowered entries back at its end: an urgent saga was
-- listed, or it claimed a released entry (a chain of releases is draining the set).
-- Neither on the usual path: one ZCARD a batch is all priorities cost there.
local drain = false
local function lower_it(s)
  if boost <= 0 or (s[21] and s[21] ~= '' and s[21] ~= '0') then return false end
  if now - tonumber(s[13]) >= boost then return false end  -- the age boost
  if waiting == nil then
    waiting = urgent_waiting(urgent, now, boost)
    drain = drain or waiting > 0
  end
  return waiting > 0
end

--@include claim_expiry

local function missing(entry, record)
  -- Once only: a re-sent batch finds the entry already acknowledged.
  if #redis.call('XPENDING', ready, group, entry, entry, 1) > 0 then
    redis.call('XADD', quarantine, 'MAXLEN', '~', 10000, '*', 'entry', entry, 'stream', ready,
               'rid', record, 'reason', 'saga not found', 't', now)
    redis.call('XACK', ready, group, entry)
    -- A released entry's reserved slot is not held for a saga that is gone: found by
    -- its record (the user went with the hash), handed on (includes/user_cap).
    if cap > 0 then
      free_orphan_slot({inflight = inflight, deferred = deferred, ready = ready}, record, now)
    end
  end
  return {RC.NOT_FOUND, entry, record}
end

--@include claim_lane

for i = 1, n do
  local entry, record, saga, hist, pages_key
  if read then
    local r = read[i]
    entry, record, saga, hist, pages_key = r[1], r[2], r[3], r[4], r[5]
  else
    entry, record = ARGV[first_pair + 2 * (i - 1)], ARGV[first_pair + 2 * (i - 1) + 1]
    local base = first_saga_key + 3 * (i - 1)
    saga, hist, pages_key = KEYS[base], KEYS[base + 1], KEYS[base + 2]
  end
  local s = nil
  if not lane_parent then s = read_saga(saga) end
  if lane_parent then
    replies[i] = claim_lane(entry, record, saga, hist, pages_key)
  elseif not s[2] then
    replies[i] = missing(entry, record)
  elseif schema_newer(s[1]) then
    replies[i] = {RC.SCHEMA_NEWER, entry, record}
  elseif s[14] == op and s[3] == STATE.RUNNING and s[9] == entry and s[10] == worker then
    local epoch = tonumber(s[5])
    replies[i] = claim_data(RC.DUPLICATE, saga, pages_key, entry, record, s,
                            attempts_of(s[15], epoch), attempts_of(s[19], epoch), s[7],
                            tonumber(s[8]))
  elseif s[9] == '' and s[20] == entry and s[3] == STATE.PENDING then
    replies[i] = {RC.DEFERRED, entry, record}  -- a re-sent batch: deferred already
  elseif (s[9] ~= entry and not (s[9] == '' and s[3] == STATE.PENDING)) or s[4] ~= step
         or (s[3] ~= STATE.PENDING and s[3] ~= STATE.RUNNING)
         or (s[9] == '' and stale_release(ready, entry, s[5])) then
    -- (a pending saga with no entry was deferred: the entry its release made is its own,
    -- if it is of the saga's epoch; only then is the entry read)
    -- Once only (a re-sent batch finds the entry acknowledged): a slot its saga holds at
    -- this step without running here (a cancelled saga's released entry's reservation,
    -- say) goes on; the slot handed on may be this saga's own again.
    if redis.call('XACK', ready, group, entry) == 1 and cap > 0
       and not (s[3] == STATE.RUNNING and s[4] == step) then
      free_slot({inflight = inflight, deferred = deferred, ready = ready}, s[2], record, now)
    end
    replies[i] = {RC.STALE_ENTRY, entry, record, s[3]}
  elseif s[3] == STATE.RUNNING and tonumber(s[8]) > now then
    replies[i] = {RC.LEASE_HELD, entry, record, s[10]}
  elseif s[3] == STATE.RUNNING and attempts_of(s[19], tonumber(s[5])) + 1 >= max_expiries then
    replies[i] = expire_dead(saga, hist, entry, record, s[2], s[3], tonumber(s[5]),
                             attempts_of(s[15], tonumber(s[5])), s[10])
  elseif s[3] == STATE.PENDING and lower_it(s) then
    redis.call('XACK', ready, group, entry)
    redis.call('HSET', saga, 'entry', '', 'dfr', entry)
    redis.call('ZADD', lowered, s[13], record .. '|' .. s[5])
    replies[i] = {RC.DEFERRED, entry, record}
  elseif s[3] == STATE.PENDING and over_cap(s[2], s[2] .. '|' .. record) then
    redis.call('XACK', ready, group, entry)
    redis.call('HSET', saga, 'entry', '', 'dfr', entry)
    redis.call('ZADD', deferred, 0, s[2] .. '|' .. string.format('%014d', now) .. '|' .. record
                                    .. '|' .. s[5])
    replies[i] = {RC.DEFERRED, entry, record}
  else
    local takeover = s[3] == STATE.RUNNING
    local epoch = tonumber(s[5])
    local seq = string.format('%d', tonumber(s[6]) + 1)
    local attempt = attempts_of(s[15], epoch) + 1
    local expired = attempts_of(s[19], epoch)
    local token = s[5] .. ':' .. seq
    local lease_until = now + lease_ms
    redis.call('HSET', saga, 'state', STATE.RUNNING, 'seq', seq, 'token', token,
               'worker', worker, 'lease', string.format('%d', lease_until), 'claimed', now_s,
               'updated', now_s, 'att:' .. step, s[5] .. ':' .. string.format('%d', attempt),
               'op', op)
    if s[9] == '' then  -- a released deferral
      redis.call('HSET', saga, 'entry', entry)
      drain = true
    end
    if boost > 0 and s[21] and s[21] ~= '' and s[21] ~= '0'
       and redis.call('ZREM', urgent, record) == 1 then
      drain = true
      if waiting then waiting = waiting - 1 end
    end
    index_state(5, record, s[3], STATE.RUNNING, now_s)
    if cap > 0 then
      local member = s[2] .. '|' .. record
      if not takeover and not redis.call('ZSCORE', inflight, member) and slots[s[2]] then
        slots[s[2]] = slots[s[2]] + 1
      end
      redis.call('ZADD', inflight, lease_until, member)
    end
    if takeover then
      -- The lost attempt ended by lease expiry: counted apart from failures.
      expired = expired + 1
      redis.call('HSET', saga, 'lx:' .. step, epoch .. ':' .. expired)
      history_append(hist, maxlen, {'e', 'reclaimed', 's', step, 'a', attempt, 'ep', epoch,
                                    'w', worker, 't', now, 'op', op,
                                    'x', 'lease of ' .. (s[10] or '?') .. ' expired',
                                    'pa', attempt - 1, 'pw', s[10] or '', 'pt', s[18] or ''})
    end
    replies[i] = claim_data(RC.OK, saga, pages_key, entry, record, s, attempt, expired, token,
                            lease_until)
  end
end
if boost > 0 and drain then
  if waiting == nil then waiting = urgent_waiting(urgent, now, boost) end
  release_lowered(ready, lowered, waiting, now, boost, 2 * n + 10)
end
if read then return {replies, unclaimed} end
return replies

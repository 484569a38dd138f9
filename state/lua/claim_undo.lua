-- claim_undo: claim a batch of ready entries of one undo step (undo:<step>), in one round
-- trip: claim_steps for a compensating saga. The saga stays 'compensating'; its lease
-- (token, lease, worker) says an undo attempt runs. The reply has claim_steps' layout;
-- the input is the undone step's input, and after it come the step's committed output,
-- its commit token (its epoch keys the step's side effects) and the undo plan left. When
-- the plan's head is a map's item ('<map>[<i>]', includes/undo_plan), the output and the
-- token are that item's ('mo:<map>:<i>', 'mt:<map>:<i>'); the input is the map's over=
-- list (ARGV[8] names its step), of which the caller takes item i.
--
-- KEYS[1]  ready stream of the undo step    {p}:ready:undo:<step>
-- KEYS[2]  dead-letter stream of the undo step
-- KEYS[3]  partition counters               {p}:stats
-- KEYS[4..9] state indexes, in keys.INDEXED order
-- KEYS[10] retired sagas (zset: "<user>|<record>" -> due ms; includes/retire)
-- KEYS[11+2(i-1)], KEYS[12+2(i-1)]  saga hash and history of entry i
-- ARGV[1]  consumer group
-- ARGV[2]  undo step name (undo:<step>)
-- ARGV[3]  worker (consumer) name
-- ARGV[4]  lease duration (ms)
-- ARGV[5]  operation id
-- ARGV[6]  history MAXLEN
-- ARGV[7]  max lease expiries (as claim_steps: reaching it ends compensation_failed)
-- ARGV[8]  the step whose output is the undone step's input ("_input" for the first)
-- ARGV[9]  retention per state (StateLimits.retention's table): a dead letter's starts
-- then pairs (entry id, record id), one per entry, at most 100 pairs
-- Returns: one reply per entry:
--   {RC.OK | RC.DUPLICATE, entry, record, user, attempt, epoch, token, lease_until_ms,
--    input, document, trace, created_ms, false, expired, output, done_token, plan}
--   {RC.NOT_FOUND, entry, record}      no saga: the entry is acknowledged
--   {RC.STALE_ENTRY, entry, record, state}  superseded entry: acknowledged, dropped
--   {RC.LEASE_HELD, entry, record, worker}  another live lease: left pending
--   {RC.SCHEMA_NEWER, entry, record}   written by a newer release: left pending
--   {RC.DEAD_LETTERED, entry, record}  the lease expiries reached their cap:
--                                      compensation_failed, dead-lettered
-- Emits: history 'reclaimed' or 'dead_lettered'; a dead letter after too many lost leases
--@include now
--@include history
--@include state_index
--@include attempts
--@include schema
--@include retire
--@include dead_letter
--@include undo_plan

local ready = KEYS[1]
local group, step, worker = ARGV[1], ARGV[2], ARGV[3]
local lease_ms, op, maxlen = tonumber(ARGV[4]), ARGV[5], ARGV[6]
local max_expiries, input_step = tonumber(ARGV[7]), ARGV[8]
local undone = string.sub(step, 6)
local retired, ret = KEYS[10], ARGV[9]
local n = math.floor((#ARGV - 9) / 2)
if n > 100 then return redis.error_reply('claim_undo: at most 100 entries per call') end

local now = now_ms()
local replies = {}
local fields = {'v', 'uid', 'state', 'step', 'epoch', 'seq', 'token', 'lease', 'entry', 'worker',
                'doc', 'trace', 'created', 'op', 'att:' .. step, 'lx:' .. step, 'claimed',
                'out:' .. input_step, 'out:' .. undone, 'done:' .. undone, 'undo'}

local function claim_data(code, entry, record, s, attempt, expired, token, lease_until)
  return {code, entry, record, s[2], attempt, tonumber(s[5]), token, lease_until, s[18] or '',
          s[11] or '', s[12] or '', tonumber(s[13]), false, expired, s[19] or '', s[20] or '',
          s[21] or ''}
end

for i = 1, n do
  local entry, record = ARGV[10 + 2 * (i - 1)], ARGV[11 + 2 * (i - 1)]
  local saga, hist = KEYS[11 + 2 * (i - 1)], KEYS[12 + 2 * (i - 1)]
  local s = redis.call('HMGET', saga, unpack(fields))
  local _, item = undo_entry(string.match(s[21] or '', '^([^,]*)'))
  if item then
    local it = redis.call('HMGET', saga, 'mo:' .. undone .. ':' .. item,
                          'mt:' .. undone .. ':' .. item)
    s[19], s[20] = it[1] or false, it[2] or false
  end
  local epoch = tonumber(s[5] or '0')
  local leased = s[7] and s[7] ~= ''
  if not s[2] then
    redis.call('XACK', ready, group, entry)
    replies[i] = {RC.NOT_FOUND, entry, record}
  elseif schema_newer(s[1]) then
    replies[i] = {RC.SCHEMA_NEWER, entry, record}
  elseif s[14] == op and s[3] == STATE.COMPENSATING and s[9] == entry and s[10] == worker
         and leased then
    replies[i] = claim_data(RC.DUPLICATE, entry, record, s, attempts_of(s[15], epoch),
                            attempts_of(s[16], epoch), s[7], tonumber(s[8]))
  elseif s[9] ~= entry or s[4] ~= step or s[3] ~= STATE.COMPENSATING then
    redis.call('XACK', ready, group, entry)
    replies[i] = {RC.STALE_ENTRY, entry, record, s[3]}
  elseif leased and tonumber(s[8]) > now then
    replies[i] = {RC.LEASE_HELD, entry, record, s[10]}
  elseif leased and attempts_of(s[16], epoch) + 1 >= max_expiries then
    local attempt = attempts_of(s[15], epoch)
    local em = 'the lease expired ' .. max_expiries .. ' times, last on attempt ' .. attempt ..
               ' (worker ' .. (s[10] or '?') .. '); the executor may be crashing on this record'
    dead_letter({saga = saga, dead = KEYS[2], stats = KEYS[3], first_index = 4,
                 retired = retired},
                {record = record, user = s[2], step = step, attempt = attempt, epoch = epoch,
                 from = s[3], ec = 'LeaseExpired', em = em, now = now,
                 to = STATE.COMPENSATION_FAILED, ret = ret})
    redis.call('XACK', ready, group, entry)
    history_append(hist, maxlen, {'e', 'dead_lettered', 's', step, 'a', attempt, 'ep', epoch,
                                  'w', worker, 't', now, 'ec', 'LeaseExpired', 'em', em, 'op', op})
    redis.call('HSET', saga, 'op', op)
    replies[i] = {RC.DEAD_LETTERED, entry, record}
  else
    local takeover = leased
    local seq = tonumber(s[6]) + 1
    local attempt = attempts_of(s[15], epoch) + 1
    local expired = attempts_of(s[16], epoch)
    local token = epoch .. ':' .. seq
    local lease_until = now + lease_ms
    redis.call('HSET', saga, 'seq', seq, 'token', token, 'worker', worker, 'lease', lease_until,
               'claimed', now, 'updated', now, 'att:' .. step, epoch .. ':' .. attempt, 'op', op)
    if takeover then
      expired = expired + 1
      redis.call('HSET', saga, 'lx:' .. step, epoch .. ':' .. expired)
      history_append(hist, maxlen, {'e', 'reclaimed', 's', step, 'a', attempt, 'ep', epoch,
                                    'w', worker, 't', now, 'op', op,
                                    'x', 'lease of ' .. (s[10] or '?') .. ' expired',
                                    'pa', attempt - 1, 'pw', s[10] or '', 'pt', s[17] or '',
                                    'i', item or ''})
    end
    replies[i] = claim_data(RC.OK, entry, record, s, attempt, expired, token, lease_until)
  end
end
return replies

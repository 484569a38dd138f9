-- start_saga: create a saga for a record and enqueue its first step.
-- Idempotent: the same record and user returns the existing saga unchanged.
--
-- KEYS[1]  saga hash                 {p}:saga:<record>
-- KEYS[2]  history stream            {p}:hist:<record>
-- KEYS[3]  ready stream, first step  {p}:ready:<step>
-- KEYS[4]  created index (zset)      {p}:idx:created
-- KEYS[5]  user index (zset)         {p}:idx:user:<user>
-- KEYS[6..11] state indexes, in SagaState order
-- KEYS[12] urgent sagas at the first step (zset; includes/lowered), used when ARGV[9] > 0
-- ARGV[1]  record id
-- ARGV[2]  user id
-- ARGV[3]  first step name
-- ARGV[4]  first step input (JSON), stored as out:_input
-- ARGV[5]  document reference ("" = resolved by the router)
-- ARGV[6]  trace context (W3C traceparent, may be "")
-- ARGV[7]  operation id
-- ARGV[8]  history MAXLEN (entries, approximate)
-- ARGV[9]  priority (0-9; absent or 0: none): above 0 the saga is stored with 'pri' and
--          listed in KEYS[12], so claims of the step set priority-0 entries aside for it
-- Returns: {RC.OK, state, step, epoch, created_ms}         created
--          {RC.DUPLICATE, state, step, epoch, created_ms}  already exists for this user
--          {RC.USER_MISMATCH, owner}                       exists for another user
-- Emits:   ready entry {rid, ep, v}; history event 'started'
--@include now
--@include history
--@include state_index

local saga, hist, ready = KEYS[1], KEYS[2], KEYS[3]
local record, user, step = ARGV[1], ARGV[2], ARGV[3]

local cur = redis.call('HMGET', saga, 'uid', 'state', 'step', 'epoch', 'created')
if cur[1] then
  if cur[1] ~= user then
    return {RC.USER_MISMATCH, cur[1]}
  end
  -- Rewritten unchanged so the repeat is replicated: a WAIT after it (durability=replica)
  -- then also covers the first call's writes, whichever connection sent them.
  redis.call('HSET', saga, 'uid', user)
  return {RC.DUPLICATE, cur[2], cur[3], tonumber(cur[4]), tonumber(cur[5])}
end

local now = now_ms()
local entry = redis.call('XADD', ready, '*', 'rid', record, 'ep', '1', 'v', SCHEMA_VERSION)
local now_s = string.format('%d', now)
-- One HSET, and no field for what is empty (no document reference, no trace, no token
-- yet: every reader takes a missing field for ""): each field is paid for in server
-- CPU, the AOF and memory for the saga's whole life.
local f = {'v', SCHEMA_VERSION, 'rid', record, 'uid', user,
           'state', STATE.PENDING, 'step', step, 'prev', '_input', 'epoch', '1', 'seq', '0',
           'entry', entry, 'created', now_s, 'updated', now_s, 'out:_input', ARGV[4],
           'op', ARGV[7]}
if ARGV[5] ~= '' then
  f[#f + 1] = 'doc'
  f[#f + 1] = ARGV[5]
end
if ARGV[6] ~= '' then
  f[#f + 1] = 'trace'
  f[#f + 1] = ARGV[6]
end
local pri = tonumber(ARGV[9] or '0') or 0
if pri > 0 then
  f[#f + 1] = 'pri'
  f[#f + 1] = string.format('%d', pri)
  redis.call('ZADD', KEYS[12], now_s, record)
end
redis.call('HSET', saga, unpack(f))
redis.call('ZADD', KEYS[4], now_s, record)
redis.call('ZADD', KEYS[5], now_s, record)
index_state(6, record, nil, STATE.PENDING, now_s)
history_append(hist, ARGV[8], {'e', 'started', 's', step, 'ep', '1', 't', now_s, 'x', user,
                               'op', ARGV[7]})
return {RC.OK, STATE.PENDING, step, 1, now}

-- claim_items: claim a batch of ready entries of one map step (includes/map_items), in one
-- round trip. An entry without an item index is the map's own (its parent committed): it
-- spawns the items, the first <concurrency> of them enqueued, the saga 'running' at the
-- map. An item's entry is claimed like a step's: a lease, a fencing token "<epoch>:<seq>"
-- (the saga's one 'seq'), the attempt counted; an expired lease is taken over.
--
-- KEYS[1]  ready stream of the map step   {p}:ready:<map>
-- KEYS[2]  quarantine stream              {p}:quarantine
-- KEYS[3]  dead-letter stream of the map  {p}:dead:<map>
-- KEYS[4]  partition counters             {p}:stats
-- KEYS[5..10] state indexes, in SagaState order
-- KEYS[11] retired sagas (zset; includes/retire)
-- KEYS[12] ready stream of the step after the map (KEYS[1] again when there is none)
-- KEYS[13..12+u] undo ready streams of ARGV[15..14+u], in that order
-- KEYS[13+u+2(i-1)], KEYS[14+u+2(i-1)]  saga hash and history of entry i
-- ARGV[1]  consumer group
-- ARGV[2]  map step name
-- ARGV[3]  worker (consumer) name
-- ARGV[4]  lease duration (ms)
-- ARGV[5]  operation id
-- ARGV[6]  history MAXLEN
-- ARGV[7]  the map's parent step (its output is the list of items)
-- ARGV[8]  max lease expiries of an item: the takeover that reaches it fails the item
-- ARGV[9]  concurrency: items open at once per saga, 1..100
-- ARGV[10] most items a map may have (at most 1000)
-- ARGV[11] the step after the map ("" completes the saga)
-- ARGV[12] on_failure: fail | partial
-- ARGV[13] retention per state (StateLimits.retention's table)
-- ARGV[14] u: number of steps with a compensation (0: none), at most 32
-- ARGV[15..14+u] those steps, latest in the pipeline first: with on_failure 'fail', an item
--          whose lease expiries reach their cap enters 'compensating' when one of them has
--          its output stored (as fail_items' dead path)
-- then quints (entry id, record id, item index or "", the entry's epoch, items), one per
--          entry, at most 100: an item's entry of another epoch is stale (a retry promoted
--          late); items, for a map's own entry whose parent's output is sealed (SAGA_DATA_KEY:
--          no script can read it), is how many items the caller's worker counted in it
--          ("-1": no list), "" otherwise
-- Returns: one reply per entry:
--   {RC.OK | RC.DUPLICATE, entry, record, user, attempt, epoch, token, lease_until_ms,
--    items, document, trace, created_ms, item, expired}   (items: the parent's output,
--    the list; the attempt's input is its element `item`)
--   {RC.SPAWNED, entry, record, items}   the map's own entry: its items were spawned (0:
--                                        fanned in at once)
--   {RC.NOT_FOUND, entry, record}        no saga: quarantined and acknowledged
--   {RC.STALE_ENTRY, entry, record, state}  superseded: acknowledged, dropped
--   {RC.LEASE_HELD, entry, record, worker}  another live lease: left pending
--   {RC.SCHEMA_NEWER, entry, record}     written by a newer release: left pending
--   {RC.DEAD_LETTERED, entry, record, state}  the parent's output is no list or too long
--                                        (the saga failed), or an item's lease expiries
--                                        reached their cap (failed item, or saga: failed
--                                        or compensating)
-- Emits: history 'spawned' (x: '<n> items'), 'reclaimed' (i, pa, pw), 'dead_lettered',
--        'fanned_in'; a ready entry {rid, ep, i, v} per item released; a dead letter
-- Hash fields: those of includes/map_items.
--@include now
--@include history
--@include state_index
--@include attempts
--@include schema
--@include retire
--@include dead_letter
--@include undo_plan
--@include map_items

local ready, quarantine = KEYS[1], KEYS[2]
local group, m, worker = ARGV[1], ARGV[2], ARGV[3]
local lease_ms, op, maxlen = tonumber(ARGV[4]), ARGV[5], ARGV[6]
local over, max_expiries = ARGV[7], tonumber(ARGV[8])
local conc, most = tonumber(ARGV[9]), tonumber(ARGV[10])
local next_step, policy, ret = ARGV[11], ARGV[12], ARGV[13]
if conc < 1 or conc > 100 then return redis.error_reply('claim_items: concurrency 1..100') end
if most > MAP_MAX_FANIN then return redis.error_reply('claim_items: at most 1000 items') end
local n_undo = tonumber(ARGV[14])
if n_undo > 32 then return redis.error_reply('claim_items: at most 32 steps to undo') end
local n = math.floor((#ARGV - 14 - n_undo) / 5)
if n > 100 then return redis.error_reply('claim_items: at most 100 entries per call') end

local now = now_ms()
local now_s = string.format('%d', now)
local replies = {}

local function missing(entry, record)
  if #redis.call('XPENDING', ready, group, entry, entry, 1) > 0 then
    redis.call('XADD', quarantine, 'MAXLEN', '~', 10000, '*', 'entry', entry, 'stream', ready,
               'rid', record, 'reason', 'saga not found', 't', now)
    redis.call('XACK', ready, group, entry)
  end
  return {RC.NOT_FOUND, entry, record}
end

local function refuse_spawn(saga, hist, entry, record, s, ec, em)
  redis.call('XACK', ready, group, entry)
  dead_letter({saga = saga, dead = KEYS[3], stats = KEYS[4], first_index = 5, retired = KEYS[11]},
              {record = record, user = s[2], step = m, attempt = 0, epoch = s[5],
               from = STATE.PENDING, ec = ec, em = em, now = now_s, ret = ret})
  redis.call('HSET', saga, 'op', op)
  history_append(hist, maxlen, {'e', 'dead_lettered', 's', m, 'ep', s[5], 'w', worker,
                                't', now_s, 'ec', ec, 'em', em, 'op', op})
  return {RC.DEAD_LETTERED, entry, record, STATE.FAILED}
end

-- The map's own entry: count the parent's items, release the first ones.
local function spawn(saga, hist, entry, record, counted)
  local s = redis.call('HMGET', saga, 'v', 'uid', 'state', 'step', 'epoch', 'entry',
                       'out:' .. over)
  if not s[2] then return missing(entry, record) end
  if schema_newer(s[1]) then return {RC.SCHEMA_NEWER, entry, record} end
  if s[3] ~= STATE.PENDING or s[4] ~= m or s[6] ~= entry then
    redis.call('XACK', ready, group, entry)
    return {RC.STALE_ENTRY, entry, record, s[3]}
  end
  local count
  if sealed_value(s[7] or '') then  -- counted by the caller, who can open it
    count = tonumber(counted) or -1
  else
    local ok, list = pcall(cjson.decode, s[7] or '')
    count = -1
    if ok and type(list) == 'table' and (next(list) == nil or list[1] ~= nil) then
      count = #list
    end
  end
  if count < 0 then
    return refuse_spawn(saga, hist, entry, record, s, 'InvalidInputError',
                        'step ' .. over .. ' did not return a list, which map ' .. m .. ' needs')
  end
  if count > most then
    return refuse_spawn(saga, hist, entry, record, s, 'InvalidInputError',
                        'step ' .. over .. ' returned ' .. count .. ' items; map ' .. m ..
                        ' takes at most ' .. most)
  end
  redis.call('XACK', ready, group, entry)
  local c = {epoch = s[5], n = count, next = 0, open = 0, done = 0, failed = 0}
  redis.call('HSET', saga, 'state', STATE.RUNNING, 'entry', '', 'token', '', 'lease', '0',
             'worker', '', 'updated', now_s, 'op', op)
  index_state(5, record, STATE.PENDING, STATE.RUNNING, now_s)
  history_append(hist, maxlen, {'e', 'spawned', 's', m, 'ep', s[5], 'w', worker, 't', now_s,
                                'x', count .. ' items', 'op', op})
  release_items({saga = saga, ready = ready}, m, c, conc, record)
  redis.call('HSET', saga, unpack(map_fields(m, c)))
  if count == 0 then
    fan_in({saga = saga, hist = hist, next_ready = KEYS[12], index_at = 5, retired = KEYS[11]},
           {m = m, record = record, user = s[2], c = c, token = s[5] .. ':0', policy = policy,
            next_step = next_step, now_s = now_s, maxlen = maxlen, op = op, ret = ret})
  end
  return {RC.SPAWNED, entry, record, count}
end

local function claim_item(saga, hist, entry, record, i, entry_epoch)
  local s = redis.call('HMGET', saga, 'v', 'uid', 'state', 'step', 'epoch', 'seq', 'doc',
                       'trace', 'created', 'out:' .. over, item_f('mi', m, i),
                       item_f('mt', m, i), item_f('me', m, i), item_f('ml', m, i),
                       item_f('mw', m, i), item_f('ma', m, i), item_f('mx', m, i),
                       item_f('mp', m, i), item_f('mc', m, i), 'map:' .. m)
  if not s[2] then return missing(entry, record) end
  if schema_newer(s[1]) then return {RC.SCHEMA_NEWER, entry, record} end
  local epoch = s[5]
  local c = map_read(saga, m)
  local st = item_state(s[11], epoch)
  local live = s[3] == STATE.RUNNING and s[4] == m and c ~= nil and c.epoch == epoch
               and entry_epoch == epoch
  local function data(code, attempt, expired, token, lease_until)
    return {code, entry, record, s[2], attempt, tonumber(epoch), token, lease_until,
            s[10] or '', s[7] or '', s[8] or '', tonumber(s[9]), tonumber(i), expired}
  end
  if live and st == 'r' and s[18] == op and s[13] == entry and s[15] == worker then
    return data(RC.DUPLICATE, attempts_of(s[16], tonumber(epoch)),
                attempts_of(s[17], tonumber(epoch)), s[12], tonumber(s[14]))
  end
  local fresh = (st == 'p' and s[13] == entry) or (st == 'w' and s[13] ~= entry)
  if not live or not (fresh or (st == 'r' and s[13] == entry)) then
    redis.call('XACK', ready, group, entry)
    return {RC.STALE_ENTRY, entry, record, s[3]}
  end
  local takeover = st == 'r'
  if takeover and tonumber(s[14]) > now then return {RC.LEASE_HELD, entry, record, s[15]} end
  local attempt = attempts_of(s[16], tonumber(epoch))
  local expired = attempts_of(s[17], tonumber(epoch))
  if takeover then
    expired = expired + 1
    redis.call('HSET', saga, item_f('mx', m, i), epoch .. ':' .. expired)
    if expired >= max_expiries then
      redis.call('XACK', ready, group, entry)
      local state = item_dead({saga = saga, hist = hist, ready = ready, next_ready = KEYS[12],
                               index_at = 5, retired = KEYS[11], dead = KEYS[3],
                               stats = KEYS[4], undo_at = 13},
        {m = m, record = record, user = s[2], c = c, token = s[12], policy = policy,
         next_step = next_step, now_s = now_s, maxlen = maxlen, op = op, ret = ret,
         conc = conc, ec = 'LeaseExpired', attempt = attempt, now = now_s, undo_args = 14,
         n_undo = n_undo,
         em = 'the lease of item ' .. i .. ' expired ' .. expired .. ' times (last worker ' ..
              (s[15] or '?') .. ')'})
      history_append(hist, maxlen, {'e', 'dead_lettered', 's', m, 'i', i, 'a', attempt,
                                    'ep', epoch, 'w', worker, 't', now_s, 'ec', 'LeaseExpired',
                                    'op', op})
      return {RC.DEAD_LETTERED, entry, record, state}
    end
  end
  attempt = attempt + 1
  local seq = string.format('%d', tonumber(s[6]) + 1)
  local token, lease_until = epoch .. ':' .. seq, now + lease_ms
  redis.call('HSET', saga, 'seq', seq, 'updated', now_s, item_f('mi', m, i), epoch .. ':r',
             item_f('mt', m, i), token, item_f('me', m, i), entry, item_f('ml', m, i),
             string.format('%d', lease_until), item_f('mw', m, i), worker,
             item_f('mc', m, i), now_s, item_f('ma', m, i), epoch .. ':' .. attempt,
             item_f('mp', m, i), op)
  if takeover then
    history_append(hist, maxlen, {'e', 'reclaimed', 's', m, 'i', i, 'a', attempt, 'ep', epoch,
                                  'w', worker, 't', now_s, 'op', op,
                                  'x', 'lease of ' .. (s[15] or '?') .. ' expired',
                                  'pa', attempt - 1, 'pw', s[15] or '', 'pt', s[19] or ''})
  end
  return data(RC.OK, attempt, expired, token, lease_until)
end

for j = 1, n do
  local at = 15 + n_undo + 5 * (j - 1)
  local entry, record, item = ARGV[at], ARGV[at + 1], ARGV[at + 2]
  local saga, hist = KEYS[13 + n_undo + 2 * (j - 1)], KEYS[14 + n_undo + 2 * (j - 1)]
  if item == '' then
    replies[j] = spawn(saga, hist, entry, record, ARGV[at + 4])
  else
    replies[j] = claim_item(saga, hist, entry, record, item, ARGV[at + 3])
  end
end
return replies

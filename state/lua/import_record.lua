-- import_record: put back one exported saga (saga import): its hash, its history with
-- the entry ids it had, and its index entries, exactly as the export found them. A long
-- history comes in several calls: the first (ARGV[9] = "1") writes the hash and indexes,
-- the next ones only append entries after the last one written. Idempotent: a re-sent
-- call finds the hash (or the entries) there and writes nothing more. No queue entry is
-- written: an imported saga that was active waits for an operator (`saga retry`).
--
-- KEYS[1]  saga hash
-- KEYS[2]  history stream
-- KEYS[3]  created index
-- KEYS[4]  user index of the saga's user
-- KEYS[5]  the index of its state (idx:state:*)
-- KEYS[6]  sagas flagged for review
-- KEYS[7]  retired sagas (zset: "<user>|<record>" -> due ms)
-- ARGV[1]  record id
-- ARGV[2]  user id
-- ARGV[3]  created index score ("" : none), ARGV[4] user index score,
-- ARGV[5]  state index score, ARGV[6] review index score, ARGV[7] retired score
-- ARGV[8]  operation id (the hash's 'op' when the export has none: its own is kept, so
--          a re-sent transition of before the export is still known as one)
-- ARGV[9]  "1": the first call of the record (hash and indexes); "0": entries only
-- ARGV[10] f: hash fields (at most 4096), then f pairs (field, value)
-- then e: history entries (at most 512), then per entry: id, n (at most 64), n pairs
-- Returns: {RC.OK, fields_written, entries_written}
--          {RC.DUPLICATE, 0, entries_written}   the hash was there: only missing entries
--          {RC.USER_MISMATCH, owner}             a saga of another user has the record
-- Emits:   the history entries given, with their own ids
local saga, hist = KEYS[1], KEYS[2]
local record, user, first = ARGV[1], ARGV[2], ARGV[9] == '1'

local f = tonumber(ARGV[10])
if f > 4096 then return redis.error_reply('ERR import_record: too many fields') end
local at = 11 + 2 * f
local e = tonumber(ARGV[at])
if e > 512 then return redis.error_reply('ERR import_record: too many entries') end

local owner = redis.call('HGET', saga, 'uid')
if owner and owner ~= user then
  return {RC.USER_MISMATCH, owner}
end
local code, written = RC.OK, 0
if first and owner then
  code = RC.DUPLICATE
elseif first then
  for i = 1, f do
    redis.call('HSET', saga, ARGV[9 + 2 * i], ARGV[10 + 2 * i])
  end
  redis.call('HSETNX', saga, 'op', ARGV[8])
  written = f
  local function score(key, value, member)
    if value ~= '' then redis.call('ZADD', key, value, member) end
  end
  score(KEYS[3], ARGV[3], record)
  score(KEYS[4], ARGV[4], record)
  score(KEYS[5], ARGV[5], record)
  score(KEYS[6], ARGV[6], record)
  score(KEYS[7], ARGV[7], user .. '|' .. record)
end

-- Entries already there (a re-sent call) are skipped: ids only grow.
local last = redis.call('XREVRANGE', hist, '+', '-', 'COUNT', 1)[1]
local last_id = last and last[1] or '0-0'
local function after(a, b)
  local a1, a2 = string.match(a, '^(%d+)-(%d+)$')
  local b1, b2 = string.match(b, '^(%d+)-(%d+)$')
  a1, a2, b1, b2 = tonumber(a1), tonumber(a2), tonumber(b1), tonumber(b2)
  return a1 > b1 or (a1 == b1 and a2 > b2)
end
local entries = 0
at = at + 1
for _ = 1, e do
  local id, n = ARGV[at], tonumber(ARGV[at + 1])
  if n > 64 then return redis.error_reply('ERR import_record: too many fields in an entry') end
  if after(id, last_id) then
    local pairs_of = {}
    for j = 1, n do
      pairs_of[#pairs_of + 1] = ARGV[at + 2 * j]
      pairs_of[#pairs_of + 1] = ARGV[at + 2 * j + 1]
    end
    redis.call('XADD', hist, id, unpack(pairs_of))
    last_id = id
    entries = entries + 1
  end
  at = at + 2 + 2 * n
end
return {code, written, entries}

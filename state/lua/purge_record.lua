-- purge_record: erase one record (saga purge): its saga hash, history, pages and the set
-- of embeddings it used, its entries in the created, user, state, review and retired
-- indexes, and what Python found of it elsewhere in its partition: ready, dead-letter
-- and quarantine entries naming it, cached LLM answers, users' slots and deferrals.
-- Refused, writing nothing, while the saga is active (pending, running, waiting for a
-- retry, waiting at a wait or a timer, compensating): cancel it first (cancel removes
-- its timer, so no sweep finds a purged record's timer to fire). Everything it deletes may be gone already, so
-- a re-sent call, or a further call with the rest of a long list (the hash already
-- deleted by the first), deletes what is left and nothing else.
--
-- KEYS[1]  saga hash
-- KEYS[2]  history stream
-- KEYS[3]  pages blob
-- KEYS[4]  embeddings the record's attempts used (set; the vectors are in another slot)
-- KEYS[5]  created index
-- KEYS[6]  user index of the saga's user (KEYS[1] again when the user is not known)
-- KEYS[7..12] state indexes, in SagaState order
-- KEYS[13] sagas flagged for review
-- KEYS[14] retired sagas (zset: "<user>|<record>" -> due ms)
-- KEYS[15..14+s] streams holding entries that name the record (ready, dead, quarantine)
-- KEYS[15+s..14+s+d] keys to delete: its cached LLM answers
-- KEYS[15+s+d..14+s+d+z] sorted sets holding members of the record (slots, deferrals)
-- ARGV[1]  record id
-- ARGV[2]  user id ("" when the hash is gone and the user not known)
-- ARGV[3]  s, ARGV[4] d, ARGV[5] z: the counts above (s, z at most 64; d at most 256)
-- ARGV[6]  x: stream entries to delete (at most 256), then x pairs (i, entry id): the
--          entry in KEYS[14+i]
-- then y (at most 256), then y pairs (j, member): the member of KEYS[14+s+d+j]
-- Returns: {RC.OK, keys_deleted, entries_deleted, members_removed}
--          {RC.WRONG_STATE, state}   the saga is active: nothing written
-- Emits:   nothing

local saga, record, user = KEYS[1], ARGV[1], ARGV[2]
local s, d, z = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local x = tonumber(ARGV[6])
local y_at = 7 + 2 * x
local y = tonumber(ARGV[y_at])
if s > 64 or z > 64 or d > 256 or x > 256 or y > 256 then
  return redis.error_reply('purge_record: too many keys or entries in one call')
end
local state = redis.call('HGET', saga, 'state')
if state == STATE.PENDING or state == STATE.RUNNING or state == STATE.WAITING_RETRY
   or state == STATE.COMPENSATING or state == STATE.WAITING then
  return {RC.WRONG_STATE, state}
end

local deleted = redis.call('DEL', saga, KEYS[2], KEYS[3], KEYS[4])
for i = 1, 256 do
  if i > d then break end
  deleted = deleted + redis.call('DEL', KEYS[14 + s + i])
end
redis.call('ZREM', KEYS[5], record)
if KEYS[6] ~= saga then redis.call('ZREM', KEYS[6], record) end
for i = 0, 5 do redis.call('ZREM', KEYS[7 + i], record) end
redis.call('ZREM', KEYS[13], record)
if user ~= '' then redis.call('ZREM', KEYS[14], user .. '|' .. record) end

local entries = 0
for i = 1, 256 do
  if i > x then break end
  local at, id = tonumber(ARGV[5 + 2 * i]), ARGV[6 + 2 * i]
  if at >= 1 and at <= s then entries = entries + redis.call('XDEL', KEYS[14 + at], id) end
end
local members = 0
for j = 1, 256 do
  if j > y then break end
  local at, member = tonumber(ARGV[y_at + 2 * j - 1]), ARGV[y_at + 2 * j]
  if at >= 1 and at <= z then members = members + redis.call('ZREM', KEYS[14 + s + d + at], member) end
end
return {RC.OK, deleted, entries, members}

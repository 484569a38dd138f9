-- Per-user in-flight cap (SAGA_USER_MAX_INFLIGHT), per partition and step. 'inflight' is
-- a zset '<user>|<record>' -> lease deadline ms (a claimed attempt, or a slot reserved for
-- a released entry); 'deferred' a zset of entries set aside while their user was at the
-- cap, score 0, member '<user>|<ms>|<record>|<epoch>' (lexical order: per user, oldest
-- first). Ids never contain '|' (state/ids.py).

-- Live slots of a user, counting stops at `limit`; expired ones (a worker died without
-- finishing: its takeover adds the member again) are dropped as they are seen.
-- ZSCAN MATCH, not ZRANGEBYLEX: the scores are deadlines, and a lexical range is only
-- defined over equal scores (another user's member with an earlier deadline that sorts
-- after '<user>|' would end the range at once and count this user's slots as 0). Ids
-- hold no glob characters (state/ids.py). At most 32 scan calls of 128: a partition's
-- slots are its running attempts, so the set stays small (listpack: one call).
local function user_slots(inflight, user, now, limit)
  local live, cursor = 0, '0'
  for _ = 1, 32 do
    local page = redis.call('ZSCAN', inflight, cursor, 'MATCH', user .. '|*', 'COUNT', 128)
    local items = page[2]
    for i = 1, 4096, 2 do  -- a page holds ~COUNT members (a listpack set: all, ≤ 128)
      if items[i] == nil then break end
      if tonumber(items[i + 1]) > now then
        live = live + 1
      else
        redis.call('ZREM', inflight, items[i])
      end
    end
    cursor = page[1]
    if cursor == '0' or live >= limit then break end
  end
  return live
end

-- Send up to n of a user's deferred entries back to the ready stream (at its tail), each
-- holding a slot until now + lease_ms: its claim takes the slot instead of counting anew.
local function release_user(deferred, inflight, ready, user, n, now, lease_ms)
  if n <= 0 then return 0 end
  local items = redis.call('ZRANGEBYLEX', deferred, '[' .. user .. '|', '[' .. user .. '|\255',
                           'LIMIT', 0, n)
  for j = 1, 1000 do  -- #items: at most n, which callers keep at most 1000
    local m = items[j]
    if not m then break end
    local record, epoch = string.match(m, '^[^|]*|[^|]*|([^|]*)|([^|]*)$')
    redis.call('ZREM', deferred, m)
    if record then
      redis.call('XADD', ready, '*', 'rid', record, 'ep', epoch, 'v', SCHEMA_VERSION)
      redis.call('ZADD', inflight, now + lease_ms, user .. '|' .. record)
    end
  end
  return #items
end

-- The end of a capped attempt (commit or fail): its slot goes to the user's oldest
-- deferred entry, if any. k = {inflight, deferred, ready}.
local function end_capped(k, user, record, now, lease_ms)
  if redis.call('ZREM', k.inflight, user .. '|' .. record) == 1 then
    release_user(k.deferred, k.inflight, k.ready, user, 1, now, lease_ms)
  end
end

-- A saga left its step another way (cancel, compensate, retry; a stale entry dropped by a
-- claim): the slot it holds there, if any, is freed; a live one goes to the user's oldest
-- deferred entry for the rest of its term (the caller may not know the step's lease). A
-- lapsed one no longer counted: release_deferred fills it. k = {inflight, deferred, ready}.
local function free_slot(k, user, record, now)
  local member = user .. '|' .. record
  local until_ms = tonumber(redis.call('ZSCORE', k.inflight, member))
  if not until_ms then return 0 end
  redis.call('ZREM', k.inflight, member)
  if until_ms <= now then return 0 end
  return release_user(k.deferred, k.inflight, k.ready, user, 1, now, until_ms - now)
end

-- A slot of `record` at the step whatever its user: for a claim, requeue or quarantine
-- that finds the saga gone (its hash deleted by retention or an operator), which took the
-- user id with it. Ids hold no '|' and no glob characters (state/ids.py), so MATCH '*|<record>' finds
-- that record's member only; a live one is handed on as free_slot does, so the slot a
-- released entry reserved is not held for nobody until its term ends. At most 32 scan
-- calls of 128, as user_slots (a partition's slots are its running attempts).
local function free_orphan_slot(k, record, now)
  local cursor = '0'
  for _ = 1, 32 do
    local page = redis.call('ZSCAN', k.inflight, cursor, 'MATCH', '*|' .. record, 'COUNT', 128)
    local member = page[2][1]
    if member then
      return free_slot({inflight = k.inflight, deferred = k.deferred, ready = k.ready},
                       string.match(member, '^([^|]*)|'), record, now)
    end
    cursor = page[1]
    if cursor == '0' then break end
  end
  return 0
end

-- The epoch ('ep') a ready entry carries, read from the stream: nil when the entry is gone
-- or its epoch is no number.
local function entry_epoch(ready, entry)
  local found = redis.call('XRANGE', ready, entry, entry)[1]
  if not found then return nil end
  local f = found[2]
  for j = 1, 15, 2 do  -- an entry has a few fields: rid, ep, v
    if f[j] == nil then break end
    if f[j] == 'ep' then return tonumber(f[j + 1]) end
  end
  return nil
end

-- Whether a deferred saga's released entry (read from the stream) is of another epoch
-- than the saga's: released for an older epoch (the saga was retried, or deferred again,
-- since), it is not the saga's to take. Callers read it only for a deferred saga (pending,
-- no entry), so the usual claim costs no command more. An entry with no readable epoch
-- is taken as the saga's (claims and requeues see only parsed entries; a quarantine
-- rather fails the saga, visibly, than leaves it waiting for nothing).
local function stale_release(ready, entry, epoch)
  local ep = entry_epoch(ready, entry)
  return ep ~= nil and ep ~= tonumber(epoch)
end

-- requeue_items: the controller's requeue of a map's idle item entries (includes/map_items;
-- requeue_idle is the saga's own entry's). An item whose lease lapsed (its worker died)
-- gets a new entry in the stream, so whatever reads it next (a worker, or one KEDA wakes
-- for the lag) takes the item over ('reclaimed', its expiry counted, as a worker's
-- recovery does). The item's state is left alone; a worker's own recovery or
-- acknowledgement wins any race: each entry is re-checked as still pending and idle.
--
-- KEYS[1]  ready stream of the map step
-- KEYS[1+i] saga hash of entry i
-- ARGV[1]  consumer group
-- ARGV[2]  minimum idle time (ms)
-- ARGV[3]  map step name
-- then triples (entry id, item index, the entry's epoch), at most 100
-- Returns: one reply per entry:
--   {RC.OK, entry, new_entry}        requeued: the old entry acknowledged, the item points
--                                    at the new one
--   {RC.BUSY, entry}                 no longer pending or idle: untouched
--   {RC.LEASE_HELD, entry}           the item's lease is still live: left pending
--   {RC.STALE_ENTRY, entry}          not a running item of the saga's current run (or no
--                                    saga): acknowledged, dropped
-- Emits:   a ready entry {rid, ep, i, v} per requeued item
--@include now
--@include map_items

local ready, group, min_idle, m = KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[3]
local n = math.floor((#ARGV - 3) / 3)
if n > 100 then return redis.error_reply('requeue_items: at most 100 entries per call') end
local now = now_ms()
local replies = {}
for j = 1, n do
  local entry, i, ep = ARGV[1 + 3 * j], ARGV[2 + 3 * j], ARGV[3 + 3 * j]
  local saga = KEYS[1 + j]
  local p = redis.call('XPENDING', ready, group, 'IDLE', min_idle, entry, entry, 1)
  if #p == 0 then
    replies[j] = {RC.BUSY, entry}
  else
    local s = redis.call('HMGET', saga, 'state', 'step', 'epoch', 'rid', item_f('mi', m, i),
                         item_f('me', m, i), item_f('ml', m, i))
    local live = s[1] == STATE.RUNNING and s[2] == m and s[3] == ep
                 and item_state(s[5], ep) == 'r' and s[6] == entry
    if not live then
      redis.call('XACK', ready, group, entry)
      replies[j] = {RC.STALE_ENTRY, entry}
    elseif tonumber(s[7] or '0') > now then
      replies[j] = {RC.LEASE_HELD, entry}
    else
      local new = redis.call('XADD', ready, '*', 'rid', s[4], 'ep', ep, 'i', i,
                             'v', SCHEMA_VERSION)
      redis.call('HSET', saga, item_f('me', m, i), new)
      redis.call('XACK', ready, group, entry)
      replies[j] = {RC.OK, entry, new}
    end
  end
end
return replies

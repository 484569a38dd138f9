-- promote_items: move due item retries of one map step back to its ready stream. The
-- entry carries the item and the epoch it failed in; claim_items takes it only if that
-- item still waits for its retry in the saga's current run (a saga retried, cancelled or
-- failed since finds it stale and drops it).
--
-- KEYS[1]  item retries of the map (zset: "<record>|<item>|<epoch>" -> due ms)
-- KEYS[2]  ready stream of the map step
-- ARGV[1]  most members to promote, at most 100
-- Returns: {RC.OK, promoted}
-- Emits:   ready entry {rid, ep, i, v} per promoted item
--@include now

local most = tonumber(ARGV[1])
if most > 100 then return redis.error_reply('promote_items: at most 100 per call') end
local due = redis.call('ZRANGE', KEYS[1], '-inf', string.format('%d', now_ms()), 'BYSCORE',
                       'LIMIT', 0, most)
local promoted = 0
for j = 1, 100 do
  local member = due[j]
  if not member then break end
  local record, item, epoch = string.match(member, '^(.+)|(%d+)|(%d+)$')
  redis.call('ZREM', KEYS[1], member)
  if record then
    redis.call('XADD', KEYS[2], '*', 'rid', record, 'ep', epoch, 'i', item, 'v', SCHEMA_VERSION)
    promoted = promoted + 1
  end
end
return {RC.OK, promoted}

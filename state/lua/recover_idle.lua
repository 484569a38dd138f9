-- recover_idle: take over ready entries idle past the lease (XAUTOCLAIM), for
-- the claim script to re-run them. Entries deleted from the stream while still
-- pending are recorded in the quarantine stream, so a lost entry is visible.
--
-- KEYS[1]  ready stream of the step
-- KEYS[2]  quarantine stream of the partition
-- ARGV[1]  consumer group
-- ARGV[2]  consumer (worker) name
-- ARGV[3]  minimum idle time (ms), the lease duration plus a margin
-- ARGV[4]  COUNT, at most 100
-- ARGV[5]  start id for the scan ("0-0" to start over)
-- Returns: {RC.OK, next_start_id, {{id, {field, value, ...}}, ...}, {deleted_id, ...}}
-- Emits:   a quarantine entry per deleted id
--@include now

local ready, quarantine = KEYS[1], KEYS[2]
local count = tonumber(ARGV[4])
if count > 100 then return redis.error_reply('recover_idle: COUNT is at most 100') end
local res = redis.call('XAUTOCLAIM', ready, ARGV[1], ARGV[2], ARGV[3], ARGV[5], 'COUNT', count)
local deleted = res[3] or {}
if #deleted > 0 then
  local now = now_ms()
  for _, id in ipairs(deleted) do
    redis.call('XADD', quarantine, 'MAXLEN', '~', 10000, '*', 'entry', id, 'stream', ready,
               'reason', 'entry deleted while pending', 't', now)
  end
end
return {RC.OK, res[1], res[2], deleted}

-- quarantine_entry: move a malformed ready entry aside with the reason, and
-- acknowledge it, so it can never crash or loop an executor and is never lost.
--
-- KEYS[1]  ready stream the entry came from
-- KEYS[2]  quarantine stream of the partition
-- ARGV[1]  consumer group
-- ARGV[2]  entry id
-- ARGV[3]  reason
-- ARGV[4]  the entry's raw fields, encoded (JSON with base64 for non-UTF-8)
-- Returns: {RC.OK, quarantine_entry_id}
--          {RC.DUPLICATE, ''}  the entry is not pending (any more): a re-sent call, or
--                              another executor quarantined it first; nothing written
-- Emits:   a quarantine entry {entry, stream, reason, raw, t}, once per entry
--@include now

-- Idempotent without an op id: only a pending entry is quarantined, and quarantining
-- acknowledges it.
if #redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1) == 0 then
  return {RC.DUPLICATE, ''}
end
local id = redis.call('XADD', KEYS[2], 'MAXLEN', '~', 10000, '*', 'entry', ARGV[2],
                      'stream', KEYS[1], 'reason', ARGV[3], 'raw', ARGV[4], 't', now_ms())
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
return {RC.OK, id}

-- reseal_stream: a stream (a record's history, a step's dead letters) rewritten with its
-- sealed values under the newest data key (saga keys rotate): stream entries cannot be
-- changed in place. 'copy' calls write the resealed entries, with their own ids, to a
-- scratch stream in the same slot (expiring, should the rotation stop); 'swap' appends
-- the entries written to the stream since (by workers, already under the newest key)
-- and puts the scratch stream in its place — unless an entry was deleted or trimmed
-- meanwhile (the lengths disagree), when it drops the scratch and writes nothing: the
-- next pass starts over.
--
-- KEYS[1]  the stream
-- KEYS[2]  its scratch stream ({p}:reseal:<the stream's name>)
-- ARGV[1]  'copy' or 'swap'
-- copy: ARGV[2] "1" for the first call (the scratch is emptied first), ARGV[3] e (at most
--       512), then per entry: id, n (at most 64), n pairs
-- swap: ARGV[2] the id of the last entry copied, ARGV[3] how many were copied
-- Returns: {RC.OK, entries}      copied, or appended at the swap
--          {RC.CONFLICT, 0}      swap: the stream changed other than by appends; dropped
-- Emits:   nothing
local stream, scratch, mode = KEYS[1], KEYS[2], ARGV[1]

if mode == 'copy' then
  local e = tonumber(ARGV[3])
  if e > 512 then return redis.error_reply('ERR reseal_stream: too many entries') end
  if ARGV[2] == '1' then redis.call('DEL', scratch) end
  local at = 4
  for _ = 1, e do
    local id, n = ARGV[at], tonumber(ARGV[at + 1])
    if n > 64 then return redis.error_reply('ERR reseal_stream: too many fields') end
    local fields = {}
    for j = 1, n do
      fields[#fields + 1] = ARGV[at + 2 * j]
      fields[#fields + 1] = ARGV[at + 2 * j + 1]
    end
    redis.call('XADD', scratch, id, unpack(fields))
    at = at + 2 + 2 * n
  end
  redis.call('EXPIRE', scratch, 3600)
  return {RC.OK, e}
end

local copied = tonumber(ARGV[3])
local newer = redis.call('XRANGE', stream, '(' .. ARGV[2], '+', 'COUNT', 513)
if #newer > 512 or redis.call('XLEN', stream) ~= copied + #newer
   or redis.call('XLEN', scratch) ~= copied then
  redis.call('DEL', scratch)
  return {RC.CONFLICT, 0}
end
for _, entry in ipairs(newer) do
  redis.call('XADD', scratch, entry[1], unpack(entry[2]))
end
redis.call('RENAME', scratch, stream)
redis.call('PERSIST', stream)
return {RC.OK, #newer}

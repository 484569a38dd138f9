-- reseal_values: values sealed under an older data key, written back sealed under the
-- newest (saga keys rotate). Compare-and-set: a value changed since it was read (a
-- worker's new write, already sealed under the newest key) is left as it is. Re-sent or
-- repeated, it finds nothing equal to the old values and writes nothing.
--
-- KEYS[1]  a saga hash, or a string key (pages blob, cached LLM answer)
-- ARGV[1]  'hash' or 'string'
-- ARGV[2]  n (at most 256): hash: n triples (field, value read, value resealed);
--          string: n = 1, then (value read, value resealed)
-- Returns: {RC.OK, written, changed}   changed: values no longer as read (left)
-- Emits:   nothing
local key, kind = KEYS[1], ARGV[1]
local n = tonumber(ARGV[2])
if n > 256 then return redis.error_reply('ERR reseal_values: too many values') end
local written, changed = 0, 0
if kind == 'string' then
  if redis.call('GET', key) == ARGV[3] then
    redis.call('SET', key, ARGV[4], 'KEEPTTL')
    written = 1
  else
    changed = 1
  end
  return {RC.OK, written, changed}
end
for i = 1, n do
  local field, old, new = ARGV[3 * i], ARGV[3 * i + 1], ARGV[3 * i + 2]
  if redis.call('HGET', key, field) == old then
    redis.call('HSET', key, field, new)
    written = written + 1
  else
    changed = changed + 1
  end
end
return {RC.OK, written, changed}

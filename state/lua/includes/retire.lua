-- Retention of an ended saga, without a TTL: 'ret' (when it is deleted, ms) in its hash and
-- its member "<user>|<record>" in the partition's retired set, due then; prune_retired
-- deletes it there with everything it owns. `spec` is StateLimits.retention's table
-- ("completed=604800,failed=2592000,...", seconds; -1 or a state missing: kept until
-- purged). `as` is the state whose retention applies (STATE.*, or 'needs_review').
local function retention_of(spec, as)
  local secs = string.match(',' .. spec .. ',', ',' .. as .. '=(%-?%d+),')
  return tonumber(secs or '-1')
end

-- k = {saga, retired}; returns the due time written ("" when kept).
local function retire(k, user, record, now, spec, as)
  local secs = retention_of(spec, as)
  if secs < 0 then
    redis.call('HSET', k.saga, 'ret', '')
    redis.call('ZREM', k.retired, user .. '|' .. record)
    return ''
  end
  local due = string.format('%d', now + secs * 1000)
  redis.call('HSET', k.saga, 'ret', due)
  redis.call('ZADD', k.retired, due, user .. '|' .. record)
  return due
end

-- A saga that ended comes alive again (compensation of a failed or cancelled saga): it
-- is no longer due for deletion.
local function unretire(k, user, record)
  redis.call('HSET', k.saga, 'ret', '')
  redis.call('ZREM', k.retired, user .. '|' .. record)
end

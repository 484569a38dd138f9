-- Append one event to a record's history stream, capped approximately at maxlen. The
-- event's names and values go in ONE stream field, 'p': a msgpack array (name, value,
-- name, value, ...), read back by state/history_codec.py. One field/value pair for the
-- server to parse, store and write to the AOF instead of ten, and a field name every
-- entry shares (saga bench: see docs/benchmarks.md, tenth round).
local function history_append(key, maxlen, fields)
  return redis.call('XADD', key, 'MAXLEN', '~', maxlen, '*', 'p', cmsgpack.pack(fields))
end

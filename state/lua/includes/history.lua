-- Append one event to a record's history stream, capped approximately at maxlen.
local function history_append(key, maxlen, fields)
  return redis.call('XADD', key, 'MAXLEN', '~', maxlen, '*', unpack(fields))
end

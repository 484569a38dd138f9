-- Idempotency by operation id: a call retried with the same op id gets the reply
-- recorded by the first call and writes nothing.
local function op_replay(saga, op)
  if op == '' then return nil end
  local rec = redis.call('HMGET', saga, 'op', 'opr')
  if rec[1] == op and rec[2] then
    local reply = cjson.decode(rec[2])
    reply[1] = RC.DUPLICATE
    return reply
  end
  return nil
end

local function op_record(saga, op, reply)
  if op ~= '' then
    redis.call('HSET', saga, 'op', op, 'opr', cjson.encode(reply))
  end
  return reply
end

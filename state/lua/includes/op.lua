-- Idempotency by operation id: a call retried with the same op id gets the reply
-- recorded by the first call and writes nothing. `slot` names the fields holding
-- the record ('op' and 'opr' by default); a script whose resend may arrive after
-- other transitions overwrote 'op' keeps its own slot.
local function op_replay(saga, op, slot)
  if op == '' then return nil end
  slot = slot or 'op'
  local rec = redis.call('HMGET', saga, slot, slot .. 'r')
  if rec[1] == op and rec[2] then
    local reply = cjson.decode(rec[2])
    reply[1] = RC.DUPLICATE
    return reply
  end
  return nil
end

local function op_record(saga, op, reply, slot)
  if op ~= '' then
    slot = slot or 'op'
    redis.call('HSET', saga, slot, op, slot .. 'r', cjson.encode(reply))
  end
  return reply
end

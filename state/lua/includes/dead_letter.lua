-- Mark a saga failed at its step and append a dead letter carrying the reason; its
-- retention starts (includes/retire: include it too).
-- k = {saga, dead, stats, first_index, retired}; f = {record, user, step, attempt, epoch,
-- from, ec, em, now, to, ret, sv}: to is STATE.FAILED unless given (STATE.COMPENSATION_FAILED
-- for an undo step); ret is the retention table (StateLimits.retention); sv, the step's
-- code version, is written ('sv') only when given and not "1".
local function dead_letter(k, f)
  local row = {'rid', f.record, 'uid', f.user, 's', f.step, 'a', f.attempt, 'ep', f.epoch,
               'ec', f.ec, 'em', f.em, 't', f.now}
  if f.sv and f.sv ~= '1' then
    row[#row + 1] = 'sv'
    row[#row + 1] = f.sv
  end
  local id = redis.call('XADD', k.dead, '*', unpack(row))
  local to = f.to or STATE.FAILED
  redis.call('HSET', k.saga, 'state', to, 'token', '', 'lease', 0, 'entry', '',
             'dead_id', id, 'ec', f.ec, 'em', f.em, 'updated', f.now,
             'worker', '')
  index_state(k.first_index, f.record, f.from, to, f.now)
  redis.call('HINCRBY', k.stats, 'dead:' .. f.step, 1)
  retire({saga = k.saga, retired = k.retired}, f.user, f.record, f.now, f.ret, to)
  return id
end

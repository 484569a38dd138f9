-- Mark a saga failed at its step and append a dead letter carrying the reason.
-- k = {saga, dead, stats, first_index}; f = {record, user, step, attempt, epoch, from, ec, em, now,
-- to}: to is STATE.FAILED unless given (STATE.COMPENSATION_FAILED for an undo step).
local function dead_letter(k, f)
  local id = redis.call('XADD', k.dead, '*', 'rid', f.record, 'uid', f.user, 's', f.step,
                        'a', f.attempt, 'ep', f.epoch, 'ec', f.ec, 'em', f.em, 't', f.now)
  local to = f.to or STATE.FAILED
  redis.call('HSET', k.saga, 'state', to, 'token', '', 'lease', 0, 'entry', '',
             'dead_id', id, 'ec', f.ec, 'em', f.em, 'updated', f.now,
             'worker', '')
  index_state(k.first_index, f.record, f.from, to, f.now)
  redis.call('HINCRBY', k.stats, 'dead:' .. f.step, 1)
  return id
end

-- claim_steps' dead path for a lease that expired too often (inlined where claim_steps
-- names it, after its locals: it reads the script's step, group, keys and limits).
-- The lease expiries reached their cap: dead-lettered ('failed'), or 'compensating' when a
-- committed step has a compensation (as fail_step's dead path: no dead letter, the undos run).
local function expire_dead(saga, hist, entry, record, user, from, epoch, attempt, last_worker)
  local em = 'the lease expired ' .. max_expiries .. ' times, last on attempt ' .. attempt ..
             ' (worker ' .. (last_worker or '?') .. '); the executor may be crashing on this record'
  local ev = {'e', 'dead_lettered', 's', step, 'a', attempt, 'ep', epoch, 'w', worker,
              't', now, 'ec', 'LeaseExpired', 'em', em, 'op', op}
  redis.call('XACK', ready, group, entry)
  if cap > 0 then
    free_slot({inflight = inflight, deferred = deferred, ready = ready}, user, record, now)
  end
  redis.call('HSET', saga, 'step', step)  -- a lane's: the saga failed there
  local plan, head = undo_plan(saga, undo_at, n_undo)
  local state = STATE.FAILED
  if head > 0 then
    ev[#ev + 1] = 'x'
    ev[#ev + 1] = STATE.COMPENSATING
    redis.call('HSET', saga, 'ec', 'LeaseExpired', 'em', em)
    redis.call('HINCRBY', KEYS[4], 'dead:' .. step, 1)
    history_append(hist, maxlen, ev)
    state = begin_undo({saga = saga, hist = hist, ready_at = 16, index_at = 5,
                        record = record, from = from, step = step, epoch = epoch, now = now,
                        maxlen = maxlen, op = op,
                        why = 'step ' .. step .. ' lost its lease ' .. max_expiries .. ' times',
                        retired = retired, user = user, ret = ret},
                       plan, head)
  else
    dead_letter({saga = saga, dead = KEYS[3], stats = KEYS[4], first_index = 5,
                 retired = retired},
                {record = record, user = user, step = step, attempt = attempt, epoch = epoch,
                 from = from, ec = 'LeaseExpired', em = em, now = now, ret = ret})
    history_append(hist, maxlen, ev)
  end
  redis.call('HSET', saga, 'op', op)
  return {RC.DEAD_LETTERED, entry, record, state}
end

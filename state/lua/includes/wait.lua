-- End a saga's wait: the wait step's output is `out` (a signal's data, the declared
-- default, or the input passed through by a sleep), committed under the token the wait
-- was parked with, and the step after it is enqueued. The wait's fields are cleared.
-- The caller appends the history event that says why.
-- c = {saga, next_ready, record, step, next_step, epoch, token, now, op, from, index_at}:
-- from is the state it leaves, index_at the KEYS position of the first state index;
-- returns the next step's ready entry.
local function end_wait(c, out)
  local entry = redis.call('XADD', c.next_ready, '*', 'rid', c.record, 'ep', c.epoch,
                           'v', SCHEMA_VERSION)
  redis.call('HSET', c.saga, 'out:' .. c.step, out, 'done:' .. c.step, c.token,
             'next:' .. c.step, c.next_step, 'prev', c.step, 'step', c.next_step,
             'state', STATE.PENDING, 'entry', entry, 'token', '', 'lease', 0, 'worker', '',
             'due', 0, 'updated', c.now, 'op', c.op)
  redis.call('HDEL', c.saga, 'wev', 'wdue', 'wnext', 'wto', 'wdef', 'wundo', 'wtok',
             'wgate')
  index_state(c.index_at, c.record, c.from, STATE.PENDING, c.now)
  return entry
end

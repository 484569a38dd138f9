--[[ breaker_success: a call got an answer; a half-open circuit closes.

KEYS[1]  breaker hash: state, opened_at, retry_at
KEYS[2]  failure log (cleared on close)
KEYS[3]  probe key (released on close)

Returns
  1  closed now: the probe (or a call in flight since before the outage) succeeded
  0  nothing changed: closed already, or open and still cooling down
No loops.
]]
local breaker = KEYS[1]
local log = KEYS[2]
local probe = KEYS[3]

if redis.call('HGET', breaker, 'state') ~= 'half_open' then
  return 0
end
redis.call('HSET', breaker, 'state', 'closed')
redis.call('HDEL', breaker, 'opened_at', 'retry_at')
redis.call('DEL', log, probe)
return 1

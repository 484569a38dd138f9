--[[ breaker_status: read a breaker as every executor sees it (read only).

KEYS[1]  breaker hash: state, opened_at, retry_at (epoch ms), window_ms
KEYS[2]  failure log: sorted set of failures scored by time (ms)

Returns {state, failures, opened_at_ms, retry_at_ms}
  state     'closed' | 'open' | 'half_open' (an open circuit past its cool-down
            reads as half_open: the next call will be the probe)
  failures  failures within the last window_ms
  opened_at_ms, retry_at_ms   0 when closed
No loops.
]]
local breaker = KEYS[1]
local log = KEYS[2]

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local fields = redis.call('HMGET', breaker, 'state', 'opened_at', 'retry_at', 'window_ms')
local state = fields[1] or 'closed'
local opened_at = tonumber(fields[2]) or 0
local retry_at = tonumber(fields[3]) or 0
local window = tonumber(fields[4]) or 0

if state == 'closed' then
  opened_at = 0
  retry_at = 0
elseif state == 'open' and now >= retry_at then
  state = 'half_open'
end
local failures = redis.call('ZCOUNT', log, '(' .. (now - window), '+inf')
return {state, failures, opened_at, retry_at}

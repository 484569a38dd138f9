--[[ breaker_acquire: may a call go to the dependency now?

KEYS[1]  breaker hash: state (closed | open | half_open), opened_at, retry_at (epoch ms)
KEYS[2]  probe key: held (SET NX PX) by the one caller probing a half-open dependency
ARGV[1]  probe lease (ms): after it, a probe that never reported is replaced
ARGV[2]  recheck (ms): while a probe is in flight, others come back after this much
         (a probe usually answers within a call's time, not its whole lease)

Returns {code, retry_at_ms}
  0  closed: the call may go ahead                        retry_at_ms = 0
  1  open: refused, cool-down still running               retry_at_ms = end of cool-down
  2  half-open: this caller holds the probe               retry_at_ms = 0
  3  half-open: another probe is in flight, refused       retry_at_ms = now + min(recheck, lease left)
No loops; the clock is the server's TIME.
]]
local breaker = KEYS[1]
local probe = KEYS[2]
local lease_ms = tonumber(ARGV[1])

local state = redis.call('HGET', breaker, 'state')
if state ~= 'open' and state ~= 'half_open' then
  return {0, 0}
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local retry_at = tonumber(redis.call('HGET', breaker, 'retry_at')) or 0
if now < retry_at then
  return {1, retry_at}
end

if redis.call('SET', probe, now, 'NX', 'PX', lease_ms) then
  redis.call('HSET', breaker, 'state', 'half_open')
  return {2, 0}
end
local left = redis.call('PTTL', probe)
if left < 0 then left = 0 end
return {3, now + math.min(left, tonumber(ARGV[2]))}

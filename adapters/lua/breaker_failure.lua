--[[ breaker_failure: count a failed call; open the circuit at K failures in the window.

KEYS[1]  breaker hash: state, opened_at, retry_at (epoch ms), window_ms, seq
KEYS[2]  failure log: sorted set of recent failures scored by time (ms), at most K members
KEYS[3]  probe key of the half-open probe
ARGV[1]  K: failures within the window that open the circuit (>= 1)
ARGV[2]  window (ms)
ARGV[3]  cool-down (ms) before a probe is allowed

Returns {code, failures, retry_at_ms}
  0  counted, still closed                   failures = failures in the window
  1  opened now: K failures in the window    retry_at_ms = end of cool-down
  2  reopened: the half-open probe failed    retry_at_ms = end of cool-down
  3  ignored: already open                   retry_at_ms = end of cool-down
No loops: the log is trimmed to K members by rank.
]]
local breaker = KEYS[1]
local log = KEYS[2]
local probe = KEYS[3]
local threshold = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cooldown = tonumber(ARGV[3])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HGET', breaker, 'state')

if state == 'open' then
  return {3, 0, tonumber(redis.call('HGET', breaker, 'retry_at')) or 0}
end

local function open(code, failures)
  local retry_at = now + cooldown
  redis.call('HSET', breaker, 'state', 'open', 'opened_at', now, 'retry_at', retry_at)
  redis.call('DEL', probe)
  return {code, failures, retry_at}
end

if state == 'half_open' then
  return open(2, 1)
end

-- A per-breaker sequence makes members unique when two failures share a millisecond.
local seq = redis.call('HINCRBY', breaker, 'seq', 1)
redis.call('HSET', breaker, 'window_ms', window)
redis.call('ZADD', log, now, seq)
redis.call('ZREMRANGEBYSCORE', log, '-inf', now - window)
redis.call('ZREMRANGEBYRANK', log, 0, -(threshold + 1))
redis.call('PEXPIRE', log, window)
local failures = redis.call('ZCARD', log)
if failures >= threshold then
  return open(1, failures)
end
return {0, failures, 0}

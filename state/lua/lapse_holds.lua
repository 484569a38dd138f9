-- lapse_holds: release budget holds whose attempt is gone (killed, fenced, its lease run
-- out), so a call that was never settled does not keep its user's budget held. Called by
-- the maintenance sweep with the holds past their deadline, a batch at a time. A hold
-- whose attempt still runs under a live lease (a heartbeat extended it) gets that
-- lease's deadline instead. A killed attempt's paid answer is billed by whichever attempt
-- uses the cached answer next (its commit or fail), lapsed or not.
--
-- KEYS[1]  the partition's holds           {p}:holds
-- KEYS[2]  the partition's hold deadlines  {p}:holds:due
-- KEYS[3]  partition counters              {p}:stats  (field holds_lapsed)
-- KEYS[3+i] saga hash of the record of hold i
-- ARGV[1]  n: number of holds, at most 64
-- ARGV[1+i] hold id i
-- Returns: {RC.OK, released, usd_released, extended}
-- Emits:   nothing
--@include now
--@include holds

local n = tonumber(ARGV[1]) or 0
if n > 64 then return redis.error_reply('lapse_holds: at most 64 holds per call') end
local now = now_ms()
local released, usd, extended = 0, 0, 0
for i = 1, 64 do
  if i > n then break end
  local id = ARGV[1 + i]
  local deadline = tonumber(redis.call('ZSCORE', KEYS[2], id))
  local v = redis.call('HGET', KEYS[1], id)
  if not v then
    redis.call('ZREM', KEYS[2], id)  -- settled already: only its deadline was left
  elseif deadline and deadline <= now then
    local token = string.match(v, '^[^|]*|[^|]*|([^|]*)|')
    local s = redis.call('HMGET', KEYS[3 + i], 'state', 'token', 'lease')
    local lease = tonumber(s[3]) or 0
    local live = s[1] == STATE.RUNNING or s[1] == STATE.COMPENSATING  -- a step's or an undo's
    if live and token ~= '' and s[2] == token and lease > now then
      redis.call('ZADD', KEYS[2], lease, id)
      extended = extended + 1
    else
      usd = usd + release_hold({holds = KEYS[1], due = KEYS[2]}, id)
      released = released + 1
    end
  end
end
if released > 0 then
  redis.call('HINCRBY', KEYS[3], 'holds_lapsed', released)
  redis.call('HINCRBYFLOAT', KEYS[3], 'holds_lapsed_usd', string.format('%.17g', usd))
end
return {RC.OK, released, string.format('%.17g', usd), extended}

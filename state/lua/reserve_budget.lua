-- reserve_budget: hold a model call's worst-case cost against its user's budget before
-- the call is made (docs/budgets.md, "Reserve, then settle"). The hold is checked and
-- written in one step, so calls in flight can never together pass the budget: each one
-- counts the spend and every hold already made. The commit or fail that attributes the
-- call's real cost releases the hold (includes/holds); a hold of an attempt that never
-- finished lapses with its lease (lapse_holds, the maintenance sweep).
--
-- KEYS[1]  saga hash (fenced: only the live attempt holding ARGV[1], a step's or an
--          undo's, may reserve)
-- KEYS[2]  this partition's holds        {p}:holds
-- KEYS[3]  this partition's hold deadlines {p}:holds:due
-- KEYS[4..3+m]      month's spend per user {p}:spend:<yyyy-mm> of every partition and
--                   saga type counted (all of them, unless Redis Cluster: see ARGV[11])
-- KEYS[4+m..3+2m]   holds {p}:holds of the same partitions and types, in that order
-- ARGV[1]  fencing token of the attempt
-- ARGV[2]  user id
-- ARGV[3]  hold id: the call's answer-cache key (one per call of an epoch)
-- ARGV[4]  worst-case cost of the call (USD, decimal)
-- ARGV[5]  lapse deadline (ms): the attempt's lease deadline
-- ARGV[6]  day of the month ("01".."31"): the day's spend field of KEYS[4..3+m]
-- ARGV[7]  daily budget (USD; "" = none)
-- ARGV[8]  monthly budget (USD; "" = none)
-- ARGV[9]  m: number of partitions and types in KEYS, at most 256
-- ARGV[10] spend and holds of the day outside KEYS (USD; Redis Cluster only, else 0)
-- ARGV[11] spend and holds of the month outside KEYS (USD; Redis Cluster only, else 0)
-- Returns: {RC.OK, held}               reserved; held = the user's spend and holds now
--          {RC.DUPLICATE, held}        the hold exists (a re-run of a killed attempt's
--                                      call): it is now this attempt's, nothing added
--          {RC.OVER_BUDGET, period, spent, held, limit}  not reserved: the call must
--                                      not be made (period 'daily' | 'monthly')
--          {RC.NOT_FOUND}
--          {RC.LEASE_LOST, state}      the attempt is fenced: nothing written
-- Emits:   nothing (the call's cost is in the commit's or fail's history event)
--@include now

local saga, holds, due = KEYS[1], KEYS[2], KEYS[3]
local token, user, id = ARGV[1], ARGV[2], ARGV[3]
local amount, deadline, dd = tonumber(ARGV[4]) or 0, ARGV[5], ARGV[6]
local m = tonumber(ARGV[9]) or 0
if m > 256 then return redis.error_reply('reserve_budget: at most 256 spend keys') end

local s = redis.call('HMGET', saga, 'state', 'token', 'rid')
if not s[1] then return {RC.NOT_FOUND} end
-- A step's attempt runs in 'running', an undo's in 'compensating': either holds the token.
local live = s[1] == STATE.RUNNING or s[1] == STATE.COMPENSATING
if not live or token == '' or s[2] ~= token then return {RC.LEASE_LOST, s[1]} end

-- What lies outside KEYS (other slots of a cluster) counts as spend.
local spent_day, spent_month, held = tonumber(ARGV[10]) or 0, tonumber(ARGV[11]) or 0, 0
for i = 1, 256 do
  if i > m then break end
  local got = redis.call('HMGET', KEYS[3 + i], user, user .. '|' .. dd)
  spent_month = spent_month + (tonumber(got[1]) or 0)
  spent_day = spent_day + (tonumber(got[2]) or 0)
  held = held + (tonumber(redis.call('HGET', KEYS[3 + m + i], 'u|' .. user)) or 0)
end
local day, month = spent_day + held, spent_month + held

local fmt = function(x) return string.format('%.17g', x) end
local old = redis.call('HGET', holds, id)
if old then
  -- The same call of an attempt that was killed before it settled: the hold carries
  -- over to this attempt (and its deadline to this lease), nothing more is held.
  local u, amt, _, rec = string.match(old, '^([^|]*)|([^|]*)|([^|]*)|(.*)$')
  redis.call('HSET', holds, id, u .. '|' .. amt .. '|' .. token .. '|' .. rec)
  redis.call('ZADD', due, deadline, id)
  return {RC.DUPLICATE, fmt(month)}
end
-- Monthly first (it lasts longer), as over_budget in state/budgets.py. A limit is
-- passed when spend + holds + this call would exceed it (an exact fit is allowed), or
-- spend + holds already reach it (a call estimated at $0, a model litellm cannot price,
-- still parks at a spent or a zero budget).
local limits = {{'monthly', tonumber(ARGV[8]), spent_month, month},
                {'daily', tonumber(ARGV[7]), spent_day, day}}
for i = 1, 2 do
  local l = limits[i]
  if l[2] and (l[4] >= l[2] or l[4] + amount > l[2] + 1e-12) then
    return {RC.OVER_BUDGET, l[1], fmt(l[3]), fmt(l[4] - l[3]), fmt(l[2])}
  end
end
local rid = s[3] or ''
redis.call('HSET', holds, id, user .. '|' .. fmt(amount) .. '|' .. token .. '|' .. rid)
redis.call('HINCRBYFLOAT', holds, 'u|' .. user, fmt(amount))
redis.call('ZADD', due, deadline, id)
return {RC.OK, fmt(month + amount)}

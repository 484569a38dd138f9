-- Budget holds (reserve_budget): h = {holds, due}. holds: field <id> =
-- "<user>|<usd>|<token>|<record>", field 'u|<user>' = the user's total held; due: zset
-- <id> -> lapse deadline (ms). Releasing deletes the field first, so a hold is released
-- at most once whoever (commit, fail, the lapse sweep) gets there first.
local function release_hold(h, id)
  local v = redis.call('HGET', h.holds, id)
  if not v then return 0 end
  local user, amt = string.match(v, '^([^|]*)|([^|]*)|')
  amt = tonumber(amt) or 0
  redis.call('HDEL', h.holds, id)
  redis.call('ZREM', h.due, id)
  local left = tonumber(redis.call('HINCRBYFLOAT', h.holds, 'u|' .. user,
                                   string.format('%.17g', -amt)))
  -- Float sums drift: below a nano-dollar the user holds nothing.
  if left <= 1e-9 then redis.call('HDEL', h.holds, 'u|' .. user) end
  return amt
end

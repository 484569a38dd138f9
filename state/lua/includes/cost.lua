-- The cost of the cached LLM answers an attempt used, each counted once: the first
-- attempt to commit or fail with an answer attributes its cost and marks it ('by'),
-- so an answer paid by a killed attempt and reused by the next is billed exactly once.
-- h = {holds, due} (includes/holds): each key's budget hold, if any, is released in the
-- same step (the call is settled: its real cost is in the total, the rest set free).
local function attributed_cost(first, n, token, h)
  local total = 0
  for i = 1, 64 do
    if i > n then break end
    local key = KEYS[first + i - 1]
    release_hold({holds = h.holds, due = h.due}, key)
    local raw = redis.call('GET', key)
    if raw then
      local ok, rec = pcall(cjson.decode, raw)
      if ok and type(rec) == 'table' and tonumber(rec.cost)
         and (rec.by == nil or rec.by == cjson.null or rec.by == '') then
        total = total + tonumber(rec.cost)
        rec.by = token
        redis.call('SET', key, cjson.encode(rec), 'KEEPTTL')
      end
    end
  end
  return total
end

-- Attribute an attempt's LLM cost to the saga, to user and step in the day's totals, and
-- to the user's spend of the month and of the day (read by the budget check).
-- k = {saga, costs, spend, dd}: dd is the day of the month ("01".."31")
local function add_cost(k, user, step, cost)
  if cost > 0 then
    redis.call('HINCRBYFLOAT', k.saga, 'cost:' .. step, cost)
    redis.call('HINCRBYFLOAT', k.costs, user .. '|' .. step, cost)
    redis.call('HINCRBY', k.costs, user .. '|' .. step .. '|n', 1)
    redis.call('HINCRBYFLOAT', k.spend, user, cost)
    redis.call('HINCRBYFLOAT', k.spend, user .. '|' .. k.dd, cost)
    -- 40 days: the month, and a while after it for `saga budget show` of last month.
    redis.call('EXPIRE', k.spend, 3456000)
  end
end

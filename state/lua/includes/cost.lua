-- Attribute an attempt's LLM cost to the saga, and to user and step in the day's totals.
local function add_cost(saga, costs_key, user, step, cost)
  if cost > 0 then
    redis.call('HINCRBYFLOAT', saga, 'cost:' .. step, cost)
    redis.call('HINCRBYFLOAT', costs_key, user .. '|' .. step, cost)
    redis.call('HINCRBY', costs_key, user .. '|' .. step .. '|n', 1)
  end
end

-- Clear the review flags (rv:<step>) of the steps that re-run, and take the record
-- out of the review index when no flag is left. ARGV[at] is n, ARGV[at+1..at+n] the
-- re-run steps, ARGV[at+n+1..] the other steps (at most 32 in all); n = 0 changes nothing.
local function clear_reviews(saga, review_index, record, at)
  local n = tonumber(ARGV[at]) or 0
  if n == 0 then return end  -- the caller named no steps: leave every flag as it is
  local left = false
  for i = 1, 32 do
    local name = ARGV[at + i]
    if not name then break end
    if i <= n then
      redis.call('HDEL', saga, 'rv:' .. name)
    elseif redis.call('HEXISTS', saga, 'rv:' .. name) == 1 then
      left = true
    end
  end
  if not left then redis.call('ZREM', review_index, record) end
end

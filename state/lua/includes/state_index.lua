-- Move a record between the per-state index sorted sets (score: time of the move).
-- `first` is the KEYS position of the first state index; STATE_POS is 0-based.
-- Pending and running share one index key (see Keys.state_index): a claim, and a
-- commit that hands the saga to its next step, move nothing there.
local function index_state(first, record, from, to, now)
  local to_key = KEYS[first + STATE_POS[to]]
  if from and from ~= '' and from ~= to then
    local from_key = KEYS[first + STATE_POS[from]]
    if from_key == to_key then return end
    redis.call('ZREM', from_key, record)
  end
  redis.call('ZADD', to_key, now, record)
end

-- Move a record between the per-state index sorted sets (score: time of the move).
-- `first` is the KEYS position of the first state index; STATE_POS is 0-based.
local function index_state(first, record, from, to, now)
  if from and from ~= '' and from ~= to then
    redis.call('ZREM', KEYS[first + STATE_POS[from]], record)
  end
  redis.call('ZADD', KEYS[first + STATE_POS[to]], now, record)
end

-- commit_steps: the exactly-once end of up to 64 attempts of one partition, in one call.
-- Each attempt is token-checked and committed in full before the next is looked at: it
-- writes the step output, acknowledges the input entry, enqueues the next step (or
-- completes the saga), attributes the cost and appends the history, exactly as a call of
-- its own would. One call per batch, not per attempt, because the call itself was the
-- cost: the EVALSHA, the TIME, the partition's keys and the counters were paid once per
-- attempt (saga bench: ~40% of the server's time per transition). A second commit of an
-- attempt (a re-sent batch) returns the recorded result, writing nothing.
--
-- KEYS[1]  partition counters   {p}:stats
-- KEYS[2]  day's cost totals    {p}:costs:<yyyy-mm-dd>
-- KEYS[3]  retired sagas (zset: "<user>|<record>" -> due ms): prune_retired deletes a
--          completed saga there, at its retention's end (its hash's 'ret')
-- KEYS[4..9] state indexes, in SagaState order
-- KEYS[10] sagas flagged for review (zset: record -> ms flagged)
-- KEYS[11] month's spend per user   {p}:spend:<yyyy-mm>
-- KEYS[12] budget holds            {p}:holds      (includes/holds; reserve_budget)
-- KEYS[13] budget hold deadlines   {p}:holds:due
-- KEYS[14] the partition's waits   {p}:waits  (a "not before" parks the saga there)
-- then, per attempt, from its first key b:
--   KEYS[b]    saga hash
--   KEYS[b+1]  history stream
--   KEYS[b+2]  pages blob
--   KEYS[b+3]  ready stream of the attempt's step
--   KEYS[b+4]  ready stream of the next step (KEYS[b+3] again when there is none; of
--              the first child a route names, includes/lanes)
--   KEYS[b+5], KEYS[b+6]  only when the step has a per-user cap: the users' slots
--              {p}:inflight:<step> and the deferred entries {p}:deferred:<step>
--              (see includes/user_cap)
--   then c cached LLM answers the attempt used (their unattributed cost is added, and
--   the budget hold of each, if any, released)
--   then, when the next step is a route naming m children (includes/lanes), the ready
--   streams of children 2..m
-- ARGV[1]  consumer group
-- ARGV[2]  history MAXLEN
-- ARGV[3]  pages TTL (s)
-- ARGV[4]  retention per state (StateLimits.retention's table, includes/retire): a
--          completed saga's, or 'needs_review''s when one of its steps flagged it
-- ARGV[5]  day of the month of KEYS[2] ("01".."31"): the day's spend field in KEYS[11]
-- ARGV[6]  n: number of attempts, at most 64
-- then 17 arguments per attempt, from its first argument a:
--   a     step name
--   a+1   fencing token
--   a+2   ready entry id of the input
--   a+3   next step name ("" completes the saga), or a route ('&...' or '|...': the
--         attempt is a lane's when it starts with '|'; includes/lanes)
--   a+4   step output (JSON)
--   a+5   operation id
--   a+6   pages blob to store ("" = none)
--   a+7   "1" to delete the pages blob
--   a+8   LLM cost of the attempt (USD, decimal)
--   a+9   checkpoint (JSON, "" = none), stored as ckpt:<step>
--   a+10  worker name
--   a+11  LLM tokens used by the attempt
--   a+12  c: number of cached-answer keys, at most 64
--   a+13  review reason ("" = none): the output needs a person's look before it is
--         trusted; stored as rv:<step>, the record joins KEYS[10]
--   a+14  the step's lease (ms) when it has a per-user cap ("0": no cap): the attempt's
--         slot goes to its user's oldest deferred entry (sent to KEYS[b+3]) for that long
--   a+15  the version of the step's code ("1" unless declared): any other is stored as
--         sv:<step> (the next step's input version) and in the event ('sv'); "1" removes
--         an sv:<step> an earlier epoch left
--   a+16  not before (includes/next_at): "0" none, "<ms>" absolute, "+<ms>" from now; in
--         the plain next-step path only (not a route), a later time parks the saga
--         'waiting' at the next step with its timer in KEYS[14] instead of adding the
--         ready entry (time_out_wait's 'resume' adds it when due)
-- Returns: one reply per attempt, in order:
--          {RC.OK, state, next_step, next_entry}   (a route: the children enqueued,
--                                                   comma-separated, and the entry of the
--                                                   saga-field step among them or "")
--          {RC.DUPLICATE, state, next_step}   this attempt was already committed
--          {RC.NOT_FOUND}
--          {RC.LEASE_LOST, state}             stale token: nothing written but a 'fenced' event
-- Emits:   history 'committed' (fields c, k, rv, sv and due only when set); ready entry
--          {rid, ep, v} for the next step (none while its not-before time is ahead)
--@include now
--@include history
--@include state_index
--@include fence
--@include holds
--@include cost
--@include committed_event
--@include user_cap
--@include retire
--@include lanes
--@include next_at

local group, maxlen, pages_ttl, retention = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local n = tonumber(ARGV[6])
if n > 64 then return redis.error_reply('commit_steps: at most 64 attempts per call') end

local now = now_ms()
-- Numbers go to redis.call as strings made once: Lua turns a number argument into a
-- string with '%.14g' (glibc's float printing), ~10 times a transition otherwise.
local now_s = string.format('%d', now)
-- Commits per step in this call: one HINCRBY per step, not per attempt.
local committed, steps = {}, {}

-- b, a: the attempt's first key and argument; its cap's lease (0: none) and first cached
-- answer's key come from the one place that walks the layout, the loop below.
local function commit_one(b, a, cap_lease, first_cost, more_ready)
  local saga, hist, pages_key = KEYS[b], KEYS[b + 1], KEYS[b + 2]
  local ready, next_ready = KEYS[b + 3], KEYS[b + 4]
  local step, token, entry, next_step = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  local op, worker, review, version = ARGV[a + 5], ARGV[a + 10], ARGV[a + 13], ARGV[a + 15]
  local route = more_ready >= 0
  local lane = route and string.byte(next_step, 1) == 124

  local s
  if lane then  -- the same places, read from the lane's fields (includes/lanes)
    s = redis.call('HMGET', saga, 'state', 'sect', 'lt@' .. step, 'le@' .. step, 'epoch', 'uid',
                   'rid', 'lc@' .. step, 'done:' .. step, 'att:' .. step, 'sv:' .. step,
                   'ls@' .. step, 'lanes', 'ec')
  else
    s = redis.call('HMGET', saga, 'state', 'step', 'token', 'entry', 'epoch', 'uid', 'rid',
                   'claimed', 'done:' .. step, 'att:' .. step, 'sv:' .. step, 'ec')
  end
  local had_error = s[lane and 14 or 12]
  if not s[1] then return {RC.NOT_FOUND} end
  if s[9] == token then
    -- Rewritten unchanged so the repeat is replicated: a WAIT after it (durability=replica)
    -- then also covers the first call's writes, whichever connection sent them.
    redis.call('HSET', saga, 'done:' .. step, token)
    return {RC.DUPLICATE, s[1], redis.call('HGET', saga, 'next:' .. step) or ''}
  end
  local live
  if lane then
    live = lane_live(s[1], s[2], s[5]) and s[12] == STATE.RUNNING and s[3] == token
  else
    live = s[1] == STATE.RUNNING and s[2] == step and s[3] == token
  end
  if not live then
    fenced(saga, hist, ready, group, entry, maxlen, step, token, worker, now_s, s[4], op, '')
    return {RC.LEASE_LOST, s[1]}
  end

  local record, user, epoch = s[7], s[6], s[5]
  local attempt = string.match(s[10] or '', ':(%d+)$') or '0'
  local duration = string.format('%d', now - (tonumber(s[8]) or now))
  local cost = (tonumber(ARGV[a + 8]) or 0)
               + attributed_cost(first_cost, tonumber(ARGV[a + 12]) or 0, token,
                                 {holds = KEYS[12], due = KEYS[13]})

  ack_attempt(ready, group, entry, s[4])
  if cap_lease > 0 then
    end_capped({inflight = KEYS[b + 5], deferred = KEYS[b + 6], ready = ready}, user, record,
               now, cap_lease)
  end
  local state, next_entry, now_step, sect, nb = STATE.COMPLETED, '', next_step, nil, nil
  if route then
    local at = {b + 4}
    for j = 1, 31 do
      if j > more_ready then break end
      at[j + 1] = first_cost + (tonumber(ARGV[a + 12]) or 0) + j - 1
    end
    local lanes, chain_step, chain_entry, fired = lane_route({saga = saga, record = record,
      step = step, epoch = epoch, spec = next_step, lanes = s[13], ready_at = at})
    next_step, now_step = fired, nil
    if chain_step then
      state, next_entry, now_step, sect = STATE.PENDING, chain_entry, chain_step, {'', ''}
    elseif #lanes > 0 then
      state, now_step, sect = STATE.RUNNING, lanes[1], {epoch, table.concat(lanes, ' ')}
    end
    if lane then lane_clear(saga, step) end
  elseif next_step ~= '' then
    nb = not_before(ARGV[a + 16], now)
    if nb then
      state = STATE.WAITING
    else
      state = STATE.PENDING
      next_entry = redis.call('XADD', next_ready, '*', 'rid', record, 'ep', epoch,
                              'v', SCHEMA_VERSION)
    end
  end
  -- One HSET for every field (each redis.call costs ~2 µs of conversion on the server).
  local f = {'out:' .. step, ARGV[a + 4], 'done:' .. step, token, 'next:' .. step, next_step,
             'prev', step, 'updated', now_s, 'op', op, 'state', state, 'entry', next_entry}
  -- The attempt's token, lease and worker are left in place when the saga leaves
  -- 'running' for its next step: every reader takes them for live only while the saga
  -- runs (or compensates), and the next claim overwrites them (saga bench: ~1 µs per
  -- transition). Cleared when it stays running (its lanes run: a zombie of this attempt
  -- must not pass for live) and when it completes (a finished hash stays as small).
  if state == STATE.RUNNING or state == STATE.COMPLETED then
    f[#f + 1], f[#f + 2], f[#f + 3], f[#f + 4] = 'token', '', 'lease', '0'
    f[#f + 5], f[#f + 6] = 'worker', ''
  end
  if had_error and had_error ~= '' then  -- an earlier attempt's error is cleared
    f[#f + 1] = 'ec'
    f[#f + 1] = ''
    f[#f + 1] = 'em'
    f[#f + 1] = ''
  end
  if now_step and now_step ~= '' then
    f[#f + 1] = 'step'
    f[#f + 1] = now_step
  end
  if sect then
    f[#f + 1] = 'sect'
    f[#f + 1] = sect[1]
    f[#f + 1] = 'lanes'
    f[#f + 1] = sect[2]
  end
  if lane then
    f[#f + 1] = 'ct:' .. step
    f[#f + 1] = now_s
  end
  local nb_s = nb and string.format('%d', nb)
  if nb then park_next_at(f, KEYS[14], record, next_step, nb_s) end
  if ARGV[a + 9] ~= '' then
    f[#f + 1] = 'ckpt:' .. step
    f[#f + 1] = ARGV[a + 9]
  end
  if version ~= '1' then
    f[#f + 1] = 'sv:' .. step
    f[#f + 1] = version
  elseif s[11] then  -- a version-1 run after a versioned one (a retry under a rollback)
    redis.call('HDEL', saga, 'sv:' .. step)
  end
  local due = nil
  if state == STATE.COMPLETED then
    -- Retention without a TTL: prune_retired (every worker's and the controller's
    -- maintenance sweep) deletes the hash and history at 'ret' with their index
    -- entries, which it had to visit anyway. Two EXPIREs per saga less, and no entry
    -- in the server's expiry table for either key. Flagged for review (by this commit
    -- or an earlier step's): kept for the review's retention.
    local as = STATE.COMPLETED
    if review ~= '' or redis.call('ZSCORE', KEYS[10], record) then as = 'needs_review' end
    local secs = retention_of(retention, as)
    due = ''
    if secs >= 0 then due = string.format('%d', now + secs * 1000) end
    f[#f + 1] = 'ret'
    f[#f + 1] = due
  end
  if review ~= '' then
    f[#f + 1] = 'rv:' .. step
    f[#f + 1] = review
    redis.call('ZADD', KEYS[10], now_s, record)
    redis.call('HINCRBY', KEYS[1], 'review:' .. step, 1)
  end
  redis.call('HSET', saga, unpack(f))
  if ARGV[a + 6] ~= '' then redis.call('SET', pages_key, ARGV[a + 6], 'EX', pages_ttl) end
  if ARGV[a + 7] == '1' then redis.call('DEL', pages_key) end
  add_cost({saga = saga, costs = KEYS[2], spend = KEYS[11], dd = ARGV[5]}, user, step, cost)
  if not committed[step] then steps[#steps + 1] = step end
  committed[step] = (committed[step] or 0) + 1

  index_state(4, record, STATE.RUNNING, state, now_s)
  local ev = committed_event(step, attempt, epoch, worker, now_s, duration, next_step, op,
                             cost, ARGV[a + 11])
  if review ~= '' then
    ev[#ev + 1] = 'rv'
    ev[#ev + 1] = review
  end
  if version ~= '1' then
    ev[#ev + 1] = 'sv'
    ev[#ev + 1] = version
  end
  if nb then
    ev[#ev + 1] = 'due'
    ev[#ev + 1] = nb_s
  end
  history_append(hist, maxlen, ev)
  if due and due ~= '' then redis.call('ZADD', KEYS[3], due, user .. '|' .. record) end
  return {RC.OK, state, next_step, next_entry}
end

local replies = {}
local b, a = 15, 7
for i = 1, 64 do
  if i > n then break end
  local cap_lease = tonumber(ARGV[a + 14]) or 0
  local first_cost = b + 5  -- after saga, history, pages, ready, next ready
  if cap_lease > 0 then first_cost = b + 7 end  -- and the cap's two keys
  local more = route_items(ARGV[a + 3]) - 1  -- -2: no route; else its children's keys after 1
  if more == -1 then more = 0 end
  replies[i] = commit_one(b, a, cap_lease, first_cost, more)
  b = first_cost + (tonumber(ARGV[a + 12]) or 0) + math.max(more, 0)
  a = a + 17
end
for j = 1, 64 do  -- #steps: at most n
  local step = steps[j]
  if not step then break end
  redis.call('HINCRBY', KEYS[1], 'committed:' .. step, committed[step])
end
return replies

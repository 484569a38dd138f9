-- Branches (saga.app_graph): a step that can run at the same time as another is a lane.
-- A lane keeps its attempt in fields of its own, '<f>@<step>' in the saga hash: ls (lane
-- state: pending | running | waiting_retry), lt (fencing token "<epoch>:<seq>", from the
-- saga's one 'seq'), le (ready entry), ll (lease deadline ms), lw (worker), lc (claimed
-- ms), lo (claim's op id), lf (token of the failure recorded). While lanes run, the saga
-- is 'running' with no token, entry or lease of its own; 'sect' holds the epoch they
-- belong to (a lane of another epoch is no one's: retried, cancelled or failed since),
-- 'lanes' the lanes in flight (space-separated) and 'step' the first of them.
-- A lane commit writes 'ct:<step>' (its commit time): compensation undoes completed
-- lanes in reverse order of completion (includes/undo_plan).
-- A commit routes with a spec from Python (Pipeline.next_of): '&' (a step on the saga's
-- fields) or '|' (a lane), then items '+<name>' (a lane) or '=<name>' (a step on the saga's
-- fields), each followed by '=<p1>,<p2>' when the child has other parents: it is enqueued
-- once every one of them committed in this epoch ('done:<p>' carries the epoch). The
-- commit of the last parent sees them all, inside its script: the join fires once.

local LANE_FIELDS = {'ls', 'lt', 'le', 'll', 'lw', 'lc', 'lo', 'lf'}

-- Whether the saga's lane `step` belongs to the saga as it is now: s_state, sect and
-- epoch are the saga's fields.
local function lane_live(s_state, sect, epoch)
  return s_state == STATE.RUNNING and sect ~= nil and sect ~= '' and sect == epoch
end

-- The words of `text` split on `sep` (a one-character class), at most `most`.
local function split_words(text, sep, most)
  if most > 64 then return redis.error_reply('split_words: at most 64 words') end
  local out, pos = {}, 1
  for _ = 1, most do
    local first, last = string.find(text or '', '[^' .. sep .. ']+', pos)
    if not first then break end
    out[#out + 1] = string.sub(text, first, last)
    pos = last + 1
  end
  return out
end

-- How many children a route names (its extra ready keys follow the cached answers').
local function route_items(spec)
  local b = string.byte(spec, 1)
  if b ~= 38 and b ~= 124 then return -1 end  -- not a route: a chain's next step
  return #split_words(string.sub(spec, 2), ' ', 32)
end

-- Route the commit of `step` in `epoch` (c = {saga, record, step, epoch, spec, lanes,
-- ready_at = {KEYS index of each item's ready stream}}). Enqueues each child whose parents
-- all committed, as a lane or on the saga's fields. Returns the lanes in flight after it
-- (a list), the saga-field step enqueued (or nil) and its entry, and the names enqueued.
local function lane_route(c)
  local lanes = {}
  if string.byte(c.spec, 1) == 124 then  -- a lane's commit: it leaves the set
    local was = split_words(c.lanes, ' ', 64)
    for j = 1, 64 do
      local name = was[j]
      if not name then break end
      if name ~= c.step then lanes[#lanes + 1] = name end
    end
  end
  local chain_step, chain_entry, fired = nil, '', {}
  local items = split_words(string.sub(c.spec, 2), ' ', 32)
  for i = 1, 32 do
    local item = items[i]
    if not item then break end
    local kind, name, others = string.match(item, '^([+=])([%w_]+)=?(.*)$')
    local go = true
    local parents = split_words(others, ',', 32)
    for j = 1, 32 do
      local p = parents[j]
      if not p then break end
      local d = redis.call('HGET', c.saga, 'done:' .. p)
      if not d or string.match(d, '^(%d+):') ~= c.epoch then
        go = false
        break
      end
    end
    if go then
      local entry = redis.call('XADD', KEYS[c.ready_at[i]], '*', 'rid', c.record, 'ep', c.epoch,
                               'v', SCHEMA_VERSION)
      fired[#fired + 1] = name
      if kind == '+' then
        redis.call('HSET', c.saga, 'ls@' .. name, STATE.PENDING, 'le@' .. name, entry,
                   'lt@' .. name, '', 'll@' .. name, '0', 'lw@' .. name, '', 'lf@' .. name, '')
        lanes[#lanes + 1] = name
      else
        chain_step, chain_entry = name, entry
      end
    end
  end
  return lanes, chain_step, chain_entry, table.concat(fired, ',')
end

-- Forget a lane's attempt fields (its commit, or its saga left the lanes).
local function lane_clear(saga, step)
  local f = {}
  for i = 1, 8 do f[i] = LANE_FIELDS[i] .. '@' .. step end
  redis.call('HDEL', saga, unpack(f))
end

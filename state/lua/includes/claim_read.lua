-- Claiming in the read (claim_steps with '>' in place of its pairs; state/claim_read.py).
-- read_entries reads up to `want` (<= 100) new entries of `ready` for `worker` (never
-- blocking) and returns the ones to claim, {entry, record, saga, history, pages} each, and
-- the entries left to the worker's own checks (not rid, ep, v of this release with a safe
-- record id), whole; or an error reply (too many, or `base` not the stream's). The keys built
-- are in the stream's slot by construction: the base holds a hash tag and begins the
-- stream's name, and a safe record id holds no brace.
local function read_entries(ready, group, worker, want, base)
  if want > 100 then return redis.error_reply('claim_steps: at most 100 entries per call') end
  if not string.find(base, '{[^}]*}') or string.sub(ready, 1, #base + 1) ~= base .. ':' then
    return redis.error_reply("claim_steps: the key base is not the ready stream's")
  end
  local read, left = {}, {}
  local got = redis.call('XREADGROUP', 'GROUP', group, worker, 'COUNT', want, 'STREAMS', ready,
                         '>')
  local ours = string.format('%d', SCHEMA_VERSION)
  for j = 1, want do
    local e = got and got[1][2][j]
    if not e then break end
    local f, rid, ep, v = e[2], nil, nil, nil
    if #f <= 16 then  -- rid, ep, v and a few more (a requeued entry's 'rq')
      for k = 1, 15, 2 do
        if not f[k] then break end
        if f[k] == 'rid' then rid = f[k + 1] elseif f[k] == 'ep' then ep = f[k + 1]
        elseif f[k] == 'v' then v = f[k + 1] end
      end
    end
    if v == ours and ep and string.match(ep, '^%d+$') and rid and #rid <= 128
       and string.match(rid, '^%w[%w%._:@%+=%-]*$') then
      read[#read + 1] = {e[1], rid, base .. ':saga:' .. rid, base .. ':hist:' .. rid,
                         base .. ':pages:' .. rid}
    else
      left[#left + 1] = e
    end
  end
  return read, left
end

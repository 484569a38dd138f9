-- claim_steps' claim of a lane's entry (includes/lanes), included where it is used: it
-- uses that script's locals (lane_fields, missing, claim_data, the step, op and worker).
-- A lane's entry: no per-user cap or priority lowering (its saga is running already).
local function claim_lane(entry, record, saga, hist, pages_key)
  local s = redis.call('HMGET', saga, unpack(lane_fields))
  if not s[2] then return missing(entry, record) end
  if schema_newer(s[1]) then return {RC.SCHEMA_NEWER, entry, record} end
  local epoch = tonumber(s[5])
  local live = lane_live(s[3], s[4], s[5])
  if live and s[14] == op and s[16] == STATE.RUNNING and s[9] == entry and s[10] == worker then
    return claim_data(RC.DUPLICATE, saga, pages_key, entry, record, s,
                      attempts_of(s[15], epoch), attempts_of(s[19], epoch), s[7], tonumber(s[8]))
  end
  if not live or s[9] ~= entry or (s[16] ~= STATE.PENDING and s[16] ~= STATE.RUNNING) then
    redis.call('XACK', ready, group, entry)
    return {RC.STALE_ENTRY, entry, record, s[3]}
  end
  local takeover = s[16] == STATE.RUNNING
  if takeover and tonumber(s[8]) > now then return {RC.LEASE_HELD, entry, record, s[10]} end
  local expired = attempts_of(s[19], epoch)
  if takeover and expired + 1 >= max_expiries then
    return expire_dead(saga, hist, entry, record, s[2], s[3], epoch, attempts_of(s[15], epoch),
                       s[10])
  end
  local seq = string.format('%d', tonumber(s[6]) + 1)
  local attempt = attempts_of(s[15], epoch) + 1
  local token, lease_until = s[5] .. ':' .. seq, now + lease_ms
  redis.call('HSET', saga, 'seq', seq, 'ls@' .. step, STATE.RUNNING, 'lt@' .. step, token,
             'lw@' .. step, worker, 'll@' .. step, string.format('%d', lease_until),
             'lc@' .. step, now_s, 'updated', now_s, 'lo@' .. step, op,
             'att:' .. step, s[5] .. ':' .. string.format('%d', attempt))
  if takeover then
    expired = expired + 1
    redis.call('HSET', saga, 'lx:' .. step, epoch .. ':' .. expired)
    history_append(hist, maxlen, {'e', 'reclaimed', 's', step, 'a', attempt, 'ep', epoch,
                                  'w', worker, 't', now, 'op', op,
                                  'x', 'lease of ' .. (s[10] or '?') .. ' expired',
                                  'pa', attempt - 1, 'pw', s[10] or '', 'pt', s[18] or ''})
  end
  return claim_data(RC.OK, saga, pages_key, entry, record, s, attempt, expired, token,
                    lease_until)
end

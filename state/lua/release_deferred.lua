-- release_deferred: send entries deferred by the per-user cap back to the step's ready
-- stream: for each user with deferred entries, as many as their free slots allow (slots
-- freed by expired leases, or a cap raised); with ARGV[4] = "1" (the workers of the step
-- are idle: nothing else waits in the stream) regardless of the cap, so a user alone
-- keeps the whole fleet busy. Each released entry holds a slot (includes/user_cap).
-- The worker calls it between reads and when a read comes back short.
--
-- KEYS[1]  entries deferred by the cap   {p}:deferred:<step>
-- KEYS[2]  users' slots of the step      {p}:inflight:<step>
-- KEYS[3]  ready stream of the step
-- ARGV[1]  per-user cap (0: none, every deferred entry may go)
-- ARGV[2]  lease of the step (ms): how long a released entry's slot is held for it
-- ARGV[3]  at most this many entries released, at most 1000
-- ARGV[4]  "1" to release regardless of the cap (idle workers)
-- ARGV[5]  at most this many users looked at, at most 1000
-- Returns: {RC.OK, released, users_looked_at}
-- Emits:   ready entry {rid, ep, v} per released entry
--@include now
--@include user_cap

local deferred, inflight, ready = KEYS[1], KEYS[2], KEYS[3]
local cap, lease_ms = tonumber(ARGV[1]), tonumber(ARGV[2])
local budget, idle, max_users = tonumber(ARGV[3]), ARGV[4] == '1', tonumber(ARGV[5])
if budget > 1000 or max_users > 1000 then
  return redis.error_reply('release_deferred: at most 1000 entries and 1000 users per call')
end
local now = now_ms()
local released, users, from = 0, 0, '-'

for _ = 1, 2000 do  -- one pass per user looked at (or entry dropped), both capped above
  if released >= budget or users >= max_users then break end
  local head = redis.call('ZRANGEBYLEX', deferred, from, '+', 'LIMIT', 0, 1)
  if #head == 0 then break end
  local user = string.match(head[1], '^([^|]*)|')
  if not user then  -- not ours: drop it rather than stop every release behind it
    redis.call('ZREM', deferred, head[1])
  else
    users = users + 1
    local room = budget - released
    if cap > 0 and not idle then
      room = math.min(room, cap - user_slots(inflight, user, now, cap + 16))
    end
    released = released + release_user(deferred, inflight, ready, user, room, now, lease_ms)
    from = '(' .. user .. '|\255'
  end
end
return {RC.OK, released, users}

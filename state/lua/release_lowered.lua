-- release_lowered: put lowered entries of one step back into its ready stream: every one
-- when no urgent saga waits at the step, else those older than the age bound (see
-- includes/lowered). Every claim does the same at its end; this runs from the promote
-- loops (workers and controller), so an idle stream does not keep them set aside.
--
-- KEYS[1]  ready stream of the step        {p}:ready:<step>
-- KEYS[2]  urgent sagas at the step (zset)  {p}:urgent:<step>
-- KEYS[3]  lowered entries (zset)           {p}:lowered:<step>
-- ARGV[1]  age bound (ms; > 0)
-- ARGV[2]  at most this many (≤ 1000)
-- Returns: {RC.OK, released}
-- Emits:   a ready entry {rid, ep, v} per released entry
--@include now
--@include lowered

local bound, most = tonumber(ARGV[1]), tonumber(ARGV[2])
if most > 1000 then return redis.error_reply('release_lowered: at most 1000') end
if redis.call('EXISTS', KEYS[3]) == 0 then return {RC.OK, 0} end
local now = now_ms()
local waiting = urgent_waiting(KEYS[2], now, bound)
return {RC.OK, release_lowered(KEYS[1], KEYS[3], waiting, now, bound, most)}

-- A step's "run the next step at / after T" (ctx.run_next_at / run_next_after): the
-- attempt's not-before value, as commit_steps receives it: "0" or "" none, "<ms>" absolute
-- (epoch ms), "+<ms>" from now by the server's clock. Returns the due ms, or nil when the
-- next step may run now (no value, or a time already past).
local function not_before(value, now)
  if value == nil or value == '' or value == '0' then return nil end
  local due
  if string.byte(value, 1) == 43 then  -- '+'
    due = now + (tonumber(string.sub(value, 2)) or 0)
  else
    due = tonumber(value) or 0
  end
  if due <= now then return nil end
  return due
end

-- Park a saga whose step just committed as a timer: state waiting at the next step, no
-- ready entry; its due time in the partition's waits, where time_out_wait's 'resume' path
-- adds the entry when it is due. f: the commit's HSET list, extended here (one HSET).
local function park_next_at(f, waits, record, next_step, due_s)
  local n = #f
  f[n + 1], f[n + 2], f[n + 3], f[n + 4] = 'due', due_s, 'wdue', due_s
  f[n + 5], f[n + 6], f[n + 7], f[n + 8] = 'wnext', next_step, 'wto', 'resume'
  f[n + 9], f[n + 10], f[n + 11], f[n + 12] = 'wev', '', 'wundo', ''
  redis.call('ZADD', waits, due_s, record)
end

-- forget_user_costs: a purged user's fields of one cost ledger (the day's totals
-- "<user>|<step>" and "<user>|<step>|n", the month's spend "<user>" and "<user>|<dd>")
-- are added to the same fields of the erased user and deleted, so the ledger's totals
-- stay and no field names the user. Python finds the fields (HSCAN) and passes them.
--
-- KEYS[1]  a cost ledger   {p}:costs:<yyyy-mm-dd> or {p}:spend:<yyyy-mm>
-- ARGV[1]  user id
-- ARGV[2]  the erased user's name (keys.ERASED_USER)
-- ARGV[3..] the user's fields, at most 100 ("<user>" or "<user>|...")
-- Returns: {RC.OK, fields_moved}
-- Emits:   nothing

local ledger, user, erased = KEYS[1], ARGV[1], ARGV[2]
if #ARGV > 102 then return redis.error_reply('forget_user_costs: at most 100 fields') end
local moved = 0
for i = 3, 102 do
  local field = ARGV[i]
  if not field then break end
  local rest = nil
  if field == user then rest = '' end
  if string.sub(field, 1, #user + 1) == user .. '|' then rest = string.sub(field, #user + 1) end
  local value = rest and redis.call('HGET', ledger, field)
  if value then
    if string.sub(rest, -2) == '|n' then
      redis.call('HINCRBY', ledger, erased .. rest, tonumber(value) or 0)
    else
      redis.call('HINCRBYFLOAT', ledger, erased .. rest, tonumber(value) or 0)
    end
    redis.call('HDEL', ledger, field)
    moved = moved + 1
  end
end
return {RC.OK, moved}

-- Attempts at a step are stored as "<epoch>:<count>": a new epoch starts from zero.
local function attempts_of(value, epoch)
  if not value then return 0 end
  local e, n = string.match(value, '^(%d+):(%d+)$')
  if e == nil or tonumber(e) ~= epoch then return 0 end
  return tonumber(n)
end

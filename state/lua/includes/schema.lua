-- Refuse sagas written by a newer release (their layout may differ).
local function schema_newer(v)
  return v and tonumber(v) > SCHEMA_VERSION
end

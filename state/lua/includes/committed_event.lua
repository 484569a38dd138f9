-- The 'committed' history event of a step's or an undo's attempt. Cost and tokens only
-- when there are some: most steps call no model, and every field is paid for in server
-- CPU, the AOF and memory on each transition.
local function committed_event(step, attempt, epoch, worker, now, duration, next_step, op,
                               cost, tokens)
  local ev = {'e', 'committed', 's', step, 'a', attempt, 'ep', epoch, 'w', worker, 't', now,
              'd', duration, 'n', next_step, 'op', op}
  if cost > 0 then
    ev[#ev + 1] = 'c'
    ev[#ev + 1] = cost
  end
  if tokens and tokens ~= '0' and tokens ~= '' then
    ev[#ev + 1] = 'k'
    ev[#ev + 1] = tokens
  end
  return ev
end

-- aimd.lua - an on_tick hook that tunes a rate limit by AIMD (additive
-- increase, multiplicative decrease), as TCP tunes its window: when more
-- than `threshold` of a name's jobs failed since the last tick, halve its
-- rate (not below `min`); when some succeeded and fewer failed, add `step`
-- back (not above `max`); a tick without jobs changes nothing. A
-- downstream service that starts failing is backed off within a tick or
-- two, and gets its traffic back slowly once it recovers.
--
--   local aimd = dofile("examples/aimd/aimd.lua")
--   hooks = { on_tick = aimd { name = "api.call", max = 20, min = 1 } }
--
-- Options: name (a job name or "queue:NAME" with a limit in `limits`),
-- max and min (jobs a second; min may be below 1, e.g. 0.1 for one job
-- every 10 s, but not 0), step (added per calm tick, default 1),
-- threshold (failure rate, default 0.2), on_change (called with the new
-- rate, for logs or tests). Needs `limits = { [name] = { rate = ... } }`
-- in the config and a short tick_interval (1s is a good start).
return function(opts)
  local name = assert(opts.name, "aimd: name is required")
  local max, min = assert(opts.max, "aimd: max is required"), opts.min or 1
  -- a rate below 1/1s still runs (its bucket holds one token), but 0
  -- would stop the name for good: no job done, so no tick adds it back
  assert(min > 0 and min <= max, "aimd: min must be above 0 and at most max")
  local step, threshold = opts.step or 1, opts.threshold or 0.2
  local rate = max
  return function(ev)
    local f = ev.limits and ev.limits[name]
    if not f then return end
    local was = rate
    if f.done + f.failed > 0 and f.failure_rate > threshold then
      rate = math.max(min, rate / 2)
    elseif f.done > 0 then
      rate = math.min(max, rate + step)
    end
    if rate ~= was then
      local limits = require "jobrunner.limits"
      assert(limits.set(name, { rate = ("%g/1s"):format(rate) }))
      if opts.on_change then opts.on_change(rate, f) end
    end
  end
end

-- examples/aimd/jobrunner.lua - a rate limit that backs off a failing
-- service by itself. Run from this directory:
--
--   jobrunner run &                       # the runner
--   for i in $(seq 500); do jobrunner push api.call; done
--   touch service.down                    # the service fails: the rate halves
--   rm service.down                       # it recovers: the rate climbs back
--
-- The runner logs each change ("limit api.call: ... rate 10/1s (hook)").
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local aimd = dofile(here .. "aimd.lua")
return {
  backend = "sqlite:aimd.db",
  scripts = here .. "scripts",
  concurrency = 4,
  tick_interval = 1,
  defaults = { max_retries = 0 },
  limits = { ["api.call"] = { rate = "20/1s" } },
  hooks = { on_tick = aimd { name = "api.call", max = 20, min = 1, step = 2 } },
}

-- schedule_red_spec.lua - schedules managed at run time pushed where a
-- careless user or an attacker would, on each backend (docs/schedules.md,
-- "Overlap, jitter, start and end" and "Schedules managed at run time"):
-- a jitter below a millisecond (the runner divided by zero), the HTTP
-- API's writes after a reload brought a config name, the way out of a
-- name in both (the remove the runner's log asks for), a change naming
-- both cron and every.
local jr = require "jr"
local H = require "jrhttp"
local cjson = require "cjson"

local function ok_cli(env, ...)
  local out, err, code = env:cli(...)
  assert.equal(0, code, out .. err)
  return out
end

local function fires(env, name)
  local at = env.backend == "postgres" and "extract(epoch FROM fire_at)::float8"
    or "fire_at"
  local rows = env:query(("SELECT %s AS at, job_id FROM schedule_fires" ..
    " WHERE schedule = '%s' ORDER BY fire_at"):format(at, name))
  for _, r in ipairs(rows) do
    r.at = tonumber(r.at)
    if r.job_id == cjson.null then r.job_id = nil end
  end
  return rows
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": schedules managed at run time, red team", function()
    local env = jr.test_env(backend)

    it("a jitter below a millisecond delays nothing; the runner lives on", function()
      env:config('retention = { completed = "1h" },\n' ..
                 'schedules = { { name = "cfgj", every = "1s", job = "c",\n' ..
                 '  jitter = 0.0004 } }')
      local p = env:start()
      ok_cli(env, "schedule", "add", "rtj", "--every", "1s", "--job", "r",
        "--jitter", "0.0009")
      jr.wait_for(function()
        return #fires(env, "rtj") >= 2 and #fires(env, "cfgj") >= 2
          or not env:alive(p)
      end, 20, "fires of both")
      assert.is_true(env:alive(p), env:log(p))
      assert.equal(0, env:stop(nil, p))
      for _, name in ipairs({ "rtj", "cfgj" }) do
        for _, r in ipairs(fires(env, name)) do
          local job = env:jobs("id = " .. r.job_id)[1]
          assert.equal(r.at, job.run_at)
        end
      end
    end)
  end)
end

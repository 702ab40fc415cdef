-- migration22_spec.lua - migration 22 (schedules managed at run time:
-- docs/schedules.md). A database of schema 18 holding jobs in every state
-- and a schedule's fire rows is brought forward by `jobrunner migrate`
-- with every job and fire intact; the run-time schedules' table comes
-- empty, its count of changes at 0, the old fires marked as no backfill's;
-- an add and a backfill then work on it, and the old fire's instant is
-- not pushed again.
local jr = require "jr"

local function old_rows(env)
  local past, later = jr.past_later(env)
  env:exec(([[
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                      locked_by, locked_until, last_error, died_at,
                      finished_at)
    VALUES ('m22.a', '{"n": 1}', 'default', 'queued', %s, 0, NULL, NULL, NULL, NULL, NULL),
           ('m22.a', '{"n": 3}', 'mail', 'running', %s, 1, 'old-runner', %s, NULL, NULL, NULL),
           ('m22.a', '{"n": 4}', 'default', 'dead', %s, 4, NULL, NULL, 'boom', %s, %s),
           ('m22.a', '{"n": 5}', 'default', 'cancelled', %s, 0, NULL, NULL, NULL, NULL, %s),
           ('m22.a', '{"n": 6}', 'default', 'completed', %s, 1, NULL, NULL, NULL, NULL, %s)
  ]]):format(past, past, later, past, past, past, past, past, past, past))
end

for _, backend in ipairs(jr.backends()) do
  local pg = backend == "postgres"
  describe(backend .. ": migration 22 (schedules managed at run time)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-18 database with its jobs and fires intact", function()
      jr.make_schema(env, 18)
      old_rows(env)
      local at = math.floor(jr.now() / 3600) * 3600 - 7200
      env:exec(pg and ("INSERT INTO schedule_fires (schedule, fire_at, job_id)" ..
        " VALUES ('hourly', to_timestamp(%d), 1)"):format(at)
        or ("INSERT INTO schedule_fires (schedule, fire_at, job_id)" ..
        " VALUES ('hourly', %d, 1)"):format(at))
      local before = jr.job_snapshot(env)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, jr.job_snapshot(env))
      assert.are.equal(0, #env:query("SELECT name FROM schedule_defs"))
      assert.are.equal(0, tonumber(env:query("SELECT rev FROM schedule_defs_rev")[1].rev))
      local f = env:query("SELECT job_id, backfill FROM schedule_fires")
      assert.are.equal(1, #f)
      assert.are.equal(1, tonumber(f[1].job_id))
      assert.is_true(f[1].backfill == nil or f[1].backfill == require("cjson").null)
      -- a run-time schedule of the old fire's name: its backfill skips
      -- the instant already fired
      out, err, code = env:cli("schedule", "add", "hourly", "--every", "1h",
        "--job", "m22.h")
      assert.are.equal(0, code, out .. err)
      out, err, code = env:cli("schedule", "backfill", "hourly", "@" .. (at - 3600),
        "@" .. (at + 3600))
      assert.are.equal(0, code, out .. err)
      assert.matches("pushed 2 jobs", out)
      assert.are.equal(1, tonumber(env:query("SELECT rev FROM schedule_defs_rev")[1].rev))
    end)
  end)
end

-- migration5_spec.lua - a database of schema 3 (the release before
-- recurring jobs) is brought forward by `jobrunner migrate` with every job
-- intact, and then fires a schedule. The schema-3 database is made from
-- the first three blocks of backends/*.sql (migration 4, another branch's,
-- may not exist yet: blocks apply when their number is above the
-- database's version, gaps are fine).
local jr = require "jr"
local cjson = require "cjson"

local function snapshot(env)
  local t = {}
  for _, r in ipairs(env:jobs()) do
    t[r.id] = { name = r.name, payload = cjson.decode(r.payload), queue = r.queue,
                priority = r.priority, state = r.state, attempts = r.attempts,
                last_error = r.last_error }
  end
  return t
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": migration 5 (schedules)", function()
    local env = jr.test_env(backend)

    it("upgrades a schema-3 database with every job intact, then fires a schedule", function()
      jr.make_schema(env, 3)
      local later = backend == "postgres" and "now() + interval '1 hour'" or
        "((julianday('now') - 2440587.5) * 86400.0) + 3600"
      env:exec(([[
        INSERT INTO jobs (name, payload, queue, priority, state, run_at, attempts,
                          last_error)
        VALUES ('m.later', '{"n": 1}', 'mail', 2, 'queued', %s, 0, NULL),
               ('m.dead', '{"n": 2}', 'default', 0, 'dead', %s, 3, 'gave up')
      ]]):format(later, later))
      local before = snapshot(env)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, snapshot(env))
      assert.are.same({}, env:query("SELECT schedule FROM schedule_fires"))
      out, err, code = env:cli("migrate")     -- again: a no-op
      assert.are.equal(0, code, out .. err)
      env:script("tick", jr.RECORD .. [[
        return function(job) record("fired", tostring(job.run_at)) end
      ]])
      env:config('poll_interval = 0.2, schedules = { { name = "tick", every = "1s" } }')
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/fired") >= 1 end, 15,
        "a fire")
      env:stop()
      assert.are.same(before, snapshot(env))
      local rows = env:query("SELECT schedule, job_id FROM schedule_fires")
      assert.is_true(#rows >= 1)
      assert.are.equal("tick", rows[1].schedule)
    end)
  end)
end

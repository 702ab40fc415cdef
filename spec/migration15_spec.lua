-- migration15_spec.lua - migration 15: a job's steps (the steps column,
-- NULL for a job that records none). A database of schema 14 with jobs
-- in every state is brought forward by `jobrunner migrate` with every job
-- intact and no steps; then its jobs run with steps, which are recorded
-- and replayed, and a dead one reruns from a step. The schema-14
-- database is made from the first blocks of backends/*/schema.sql.
local jr = require "jr"
local cjson = require "cjson"

local function old_jobs(env)
  local past, later = jr.past_later(env)
  env:exec(([[
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                      locked_by, locked_until, finished_at, died_at,
                      last_error)
    VALUES ('m15', '{"n": 1}', 'default', 'queued', %s, 0, NULL, NULL, NULL, NULL, NULL),
           ('m15', '{"n": 2}', 'default', 'queued', %s, 0, NULL, NULL, NULL, NULL, NULL),
           ('m15', '{"n": 3}', 'default', 'running', %s, 1, 'gone', %s, NULL, NULL, NULL),
           ('m15', '{"n": 4}', 'default', 'dead', %s, 3, NULL, NULL, %s, %s, 'boom'),
           ('m15', '{"n": 5}', 'default', 'cancelled', %s, 0, NULL, NULL, %s, NULL, NULL),
           ('m15', '{"n": 6}', 'default', 'completed', %s, 1, NULL, NULL, %s, NULL, NULL),
           ('m15', '{"n": 7}', 'default', 'waiting', %s, 0, NULL, NULL, NULL, NULL, NULL)
  ]]):format(past, later, past, past, past, past, past, past, past, past,
             past, past))
end

local function steps(env)
  local col = env.backend == "postgres" and "steps::text AS steps" or "steps"
  local t = {}
  for _, r in ipairs(env:query("SELECT id, " .. col .. " FROM jobs ORDER BY id")) do
    t[tonumber(r.id)] = r.steps ~= cjson.null and cjson.decode(r.steps) or false
  end
  return t
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": migration 15 (steps)", function()
    local env
    before_each(function() env = jr.env(backend, { config = "lease = 1" }) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-14 database with its jobs intact; they run with steps", function()
      jr.make_schema(env, 14)
      old_jobs(env)
      local before = jr.job_snapshot(env)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, jr.job_snapshot(env))
      for id = 1, 7 do assert.is_false(steps(env)[id], id) end
      env:script("m15", [[
        local jobrunner = require "jobrunner"
        return { max_retries = 3, handle = function(job)
          local a = jobrunner.step("a", function() return job.payload.n end)
          return jobrunner.step("b", function() return a * 10 end)
        end }]])
      env:start()
      env:wait_state(1, "completed", 30)
      env:wait_state(3, "completed", 60)       -- its lease expired: rescued
      local s = steps(env)
      assert.are.equal(2, #s[1])
      assert.are.equal(10, s[1][2].value)
      assert.are.equal(30, s[3][2].value)
      assert.is_false(s[2])
      -- the dead one from its second step: a replays its record
      env:exec([[UPDATE jobs SET steps = '[{"name":"a","value":41,"at":1,]] ..
        [["secs":0,"attempt":1},{"name":"b","value":0,"at":1,"secs":0,"attempt":1}]' WHERE id = 4]])
      out, err, code = env:cli("rerun", "4", "--from-step", "b")
      assert.are.equal(0, code, err)
      env:wait_state(4, "completed", 30)
      assert.are.equal(410, steps(env)[4][2].value)
      out, err, code = env:cli("rerun", "5")
      assert.are.equal(0, code, err)
      env:wait_state(5, "completed", 30)
      assert.are.equal(50, steps(env)[5][2].value)
      for _, id in ipairs({ 2, 7 }) do
        local r = env:job(id)
        assert.are.equal(before[id].state, r.state)
      end
      out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
    end)
  end)
end

-- migration10_spec.lua - migration 10 adds results: jobs.result (JSON,
-- NULL when the handler returned nothing), result_ttl and keep_until, the
-- index of the kept jobs, and on PostgreSQL the jobs_finished NOTIFY and
-- the functions outcome() and watch(). A database of the previous schema
-- (9 on PostgreSQL, 8 on SQLite, which has no migration 9) with jobs in
-- every state is brought forward by `jobrunner migrate` with every job
-- intact; its queued job then runs and keeps its result, and `wait` sees
-- the old finished ones. Made from the first blocks of backends/*/schema.sql.
local jr = require "jr"
local cjson = require "cjson"

local function old_jobs(env)
  local past = jr.past_later(env)
  env:exec(([[
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                      last_error, locked_by, locked_until, finished_at)
    VALUES ('m10.r', '{"n": 1}', 'default', 'queued', %s, 0, NULL, NULL,
            NULL, NULL),
           ('m10.r', '{"n": 2}', 'default', 'running', %s, 1, NULL,
            'lost-runner', %s, NULL),
           ('m10.r', '{"n": 3}', 'default', 'dead', %s, 4, 'gave up', NULL,
            NULL, %s),
           ('m10.r', '{"n": 4}', 'default', 'cancelled', %s, 0, 'cancelled',
            NULL, NULL, %s),
           ('m10.r', '{"n": 5}', 'default', 'completed', %s, 1, NULL, NULL,
            NULL, %s)
  ]]):format(past, past, past, past, past, past, past, past, past))
end

local function snapshot(env)
  local t = {}
  for _, r in ipairs(env:jobs()) do
    t[r.id] = { name = r.name, payload = cjson.decode(r.payload),
                state = r.state, attempts = r.attempts,
                locked_by = r.locked_by, last_error = r.last_error }
  end
  return t
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": migration 10 (results)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades the previous schema with jobs in every state intact; results work after", function()
      local prev = backend == "postgres" and 9 or 8
      jr.make_schema(env, prev)
      old_jobs(env)
      local before = snapshot(env)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, snapshot(env))
      local v = backend == "postgres"
        and env:query("SELECT max(version) AS v FROM migrations")[1].v
        or env:query("PRAGMA user_version")[1].user_version
      assert.is_true(v >= 10)
      for _, r in ipairs(env:query("SELECT id, result, result_ttl, keep_until FROM jobs")) do
        assert.are.equal(cjson.null, r.result)
        assert.are.equal(cjson.null, r.result_ttl)
        assert.are.equal(cjson.null, r.keep_until)
      end
      -- the old finished jobs are outcomes a waiter sees at once
      out, err, code = env:cli("wait", "3", "4", "5")
      assert.are.equal(1, code, out .. err)
      assert.are.equal("3 dead - (gave up)\n4 cancelled - (cancelled)\n5 completed -\n", out)
      -- the old queued job runs and keeps its result
      env:script("m10.r", "return function(job) return { twice = job.payload.n * 2 } end")
      env:start()
      out, err, code = env:cli("wait", "1", "--json", "--timeout", "30")
      assert.are.equal(0, code, out .. err)
      assert.are.same({ twice = 2 }, cjson.decode(out).result)
      assert.are.equal("completed", env:job(1).state)
      assert.are.equal(0, env:stop())
    end)
  end)
end

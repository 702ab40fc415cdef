-- migration17_spec.lua - migration 17: jobs.sql_statements, how many
-- jobrunner.sql statements a job's success committed, set only on a
-- success that carried some and stays completed (NULL for every other
-- job). A database of schema 14 with jobs in every state is brought
-- forward by `jobrunner migrate` with every job intact and the column
-- NULL on all; then `show` (text and --json) and GET /api/jobs/ID list a
-- kept success's statements, and nothing for a job without any. The
-- schema-14 database is made from the first blocks of
-- backends/*/schema.sql.
local jr = require "jr"
local cjson = require "cjson"
local H = require "jrhttp"

local function old_jobs(env)
  local past, later = jr.past_later(env)
  env:exec(([[
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                      last_error, locked_by, locked_until, finished_at,
                      flow, parents_left)
    VALUES ('m17.a', '{"n": 1}', 'default', 'queued', %s, 0, NULL, NULL, NULL, NULL, 1, 0),
           ('m17.b', '{"n": 2}', 'default', 'waiting', %s, 0, NULL, NULL, NULL, NULL, 0, 1),
           ('m17.a', '{"n": 3}', 'default', 'running', %s, 1, NULL,
            'lost-runner:1:ab', %s, NULL, 0, 0),
           ('m17.a', '{"n": 4}', 'default', 'dead', %s, 4, 'gave up', NULL, NULL, %s, 0, 0),
           ('m17.a', '{"n": 5}', 'default', 'cancelled', %s, 0, 'cancelled', NULL, NULL, %s, 0, 0),
           ('m17.a', '{"n": 6}', 'default', 'completed', %s, 1, NULL, NULL, NULL, %s, 0, 0),
           ('m17.a', '{"n": 7}', 'mail', 'queued', %s, 0, NULL, NULL, NULL, NULL, 0, 0)
  ]]):format(past, past, past, later, past, past, past, past, past, past, later))
  env:exec("INSERT INTO job_deps (parent_id, child_id) VALUES (1, 2)")
end

local function has_column(env)
  local sql = env.backend == "postgres"
    and "SELECT column_name AS name FROM information_schema.columns" ..
        " WHERE table_schema = current_schema() AND table_name = 'jobs'" ..
        " AND column_name = 'sql_statements'"
    or "SELECT name FROM pragma_table_info('jobs') WHERE name = 'sql_statements'"
  return #env:query(sql) == 1
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": migration 17 (jobs.sql_statements)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-14 database with its jobs in every state intact", function()
      jr.make_schema(env, 14)
      old_jobs(env)
      assert.is_false(has_column(env))
      local before = jr.job_snapshot(env)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.is_true(has_column(env))
      assert.are.same(before, jr.job_snapshot(env))
      assert.are.equal(0, #env:query("SELECT id FROM jobs WHERE sql_statements IS NOT NULL"))
      for id = 1, 7 do
        out, err, code = env:cli("show", tostring(id), "--json")
        assert.are.equal(0, code, out .. err)
        assert.are.equal(cjson.null, cjson.decode(out).sql_statements)
      end
      -- the upgraded runner runs the old queued job and new ones
      env:script("m17.a", "return function() end")
      env:start()
      jr.wait_for(function()
        local j = env:job(1)
        return j == nil or (j.state ~= "queued" and j.state ~= "running")
      end)
      assert.are.equal(0, env:stop())
    end)

    it("show and the API list the statements a kept success committed", function()
      local t
      if backend == "postgres" then
        jr.psql("CREATE SCHEMA IF NOT EXISTS " .. env.schema)
        jr.psql("CREATE TABLE " .. env.schema .. ".ledger (job bigint, k int)")
        t = env.schema .. ".ledger"
      else
        env:exec("CREATE TABLE ledger (job INTEGER, k INTEGER)")
        t = "ledger"
      end
      env:script("pay", ([[
        local jobrunner = require "jobrunner"
        return function(job)
          for k = 1, job.payload.n do
            jobrunner.sql("INSERT INTO %s (job, k) VALUES ($1, $2)", job.id, k)
          end
        end]]):format(t))
      local base = H.start(env, "retention = { completed = 3600 }")
      local three = env:push("pay", '{"n": 3}')
      local none = env:push("pay", '{"n": 0}')
      jr.wait_for(function()
        return env:job(three).state == "completed" and env:job(none).state == "completed"
      end)
      local out, err, code = env:cli("show", tostring(three))
      assert.are.equal(0, code, out .. err)
      assert.truthy(out:find("\nstatements    3 (jobrunner.sql, committed with its success)\n", 1, true), out)
      out = env:cli("show", tostring(none))
      assert.is_nil(out:find("\nstatements ", 1, true), out)
      out = env:cli("show", tostring(three), "--json")
      assert.are.equal(3, cjson.decode(out).sql_statements)
      local status, body = H.req(base .. "/api/jobs/" .. three, { token = true })
      assert.are.equal(200, status, body)
      assert.are.equal(3, cjson.decode(body).sql_statements)
      status, body = H.req(base .. "/api/jobs/" .. none, { token = true })
      assert.are.equal(cjson.null, cjson.decode(body).sql_statements)
      local q = jr.client(env)
      assert.are.equal(3, q:show(three).sql_statements)
      assert.is_nil(q:show(none).sql_statements)
      q:close()
      assert.are.equal(3, #env:query("SELECT job FROM " .. t))
      assert.are.equal(0, env:stop())
    end)

    it("lists them for successes kept for their result_ttl, in a batch or alone", function()
      if backend == "postgres" then
        jr.psql("CREATE SCHEMA IF NOT EXISTS " .. env.schema)
        jr.psql("CREATE TABLE " .. env.schema .. ".ledger (job bigint, k int)")
      else
        env:exec("CREATE TABLE ledger (job INTEGER, k INTEGER)")
      end
      local t = backend == "postgres" and env.schema .. ".ledger" or "ledger"
      env:script("pay", ([[
        local jobrunner = require "jobrunner"
        return { inflight = 12, handle = function(job)
          jobrunner.sleep(0.5)  -- they end together: one batch of results
          for k = 1, job.payload.n do
            jobrunner.sql("INSERT INTO %s (job, k) VALUES ($1, $2)", job.id, k)
          end
        end }]]):format(t))
      local ids = {}
      for i = 1, 12 do
        ids[i] = env:push("pay", ('{"n": %d}'):format(i % 3), "--result-ttl", "1h")
      end
      env:config("concurrency = 1")
      env:start()
      jr.wait_for(function()
        for _, id in ipairs(ids) do
          if env:job(id).state ~= "completed" then return false end
        end
        return true
      end)
      for i, id in ipairs(ids) do
        local out = env:cli("show", tostring(id), "--json")
        local want = i % 3 > 0 and i % 3 or cjson.null
        assert.are.equal(want, cjson.decode(out).sql_statements, out)
      end
      assert.are.equal(0, env:stop())
    end)
  end)
end

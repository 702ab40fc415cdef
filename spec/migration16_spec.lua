-- migration16_spec.lua - migration 16: signals and durable sleep. On both
-- backends the jobs table gains waits (the records a later attempt
-- replays), wait_on and wake_at, with two partial indexes; PostgreSQL
-- gains jobrunner.signal(). A database of schema 14 with jobs in every
-- state (a flow's children waiting for their parents among them) is
-- brought forward by `jobrunner migrate` with every job intact and none
-- of the new columns set; the flows' waiting children are neither woken
-- nor counted as waiting on a signal or a date; then a runner finishes
-- the parents, a released child waits for a signal, and the signal (by
-- the CLI, and by plain SQL on PostgreSQL) makes it run to its end. The
-- schema-14 database is made from the first blocks of
-- backends/*/schema.sql.
local jr = require "jr"
local cjson = require "cjson"

local function old_jobs(env)
  local past = jr.past_later(env)     -- 3's lease too: its runner is lost
  env:exec(([[
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                      last_error, locked_by, locked_until, finished_at,
                      flow, parents_left)
    VALUES ('m16.a', '{"n": 1}', 'default', 'queued', %s, 0, NULL, NULL, NULL, NULL, 1, 0),
           ('m16.b', '{"n": 2}', 'default', 'waiting', %s, 0, NULL, NULL, NULL, NULL, 0, 1),
           ('m16.a', '{"n": 3}', 'default', 'running', %s, 1, NULL,
            'lost-runner:1:ab', %s, NULL, 1, 0),
           ('m16.b', '{"n": 4}', 'default', 'waiting', %s, 0, NULL, NULL, NULL, NULL, 0, 1),
           ('m16.a', '{"n": 5}', 'default', 'dead', %s, 4, 'gave up', NULL, NULL, %s, 0, 0),
           ('m16.a', '{"n": 6}', 'default', 'cancelled', %s, 0, 'cancelled', NULL, NULL, %s, 0, 0),
           ('m16.a', '{"n": 7}', 'default', 'completed', %s, 1, NULL, NULL, NULL, %s, 0, 0),
           ('m16.a', '{"n": 8}', 'mail', 'queued', %s, 0, NULL, NULL, NULL, NULL, 0, 0)
  ]]):format(past, past, past, past, past, past, past, past, past, past, past,
             past))
  env:exec("INSERT INTO job_deps (parent_id, child_id) VALUES (1, 2), (3, 4)")
end

local function new_columns(env)
  return env:query("SELECT count(*) AS n FROM jobs WHERE waits IS NOT NULL" ..
                   " OR wait_on IS NOT NULL OR wake_at IS NOT NULL")[1].n
end

local function indexes(env)
  local sql = env.backend == "postgres"
    and "SELECT indexname AS name FROM pg_indexes WHERE tablename = 'jobs'" ..
        " AND schemaname = current_schema() AND indexname IN ('jobs_wake', 'jobs_wait_on')" ..
        " ORDER BY 1"
    or "SELECT name FROM sqlite_master WHERE type = 'index'" ..
       " AND name IN ('jobs_wake', 'jobs_wait_on') ORDER BY 1"
  local t = {}
  for _, r in ipairs(env:query(sql)) do t[#t + 1] = r.name end
  return t
end

local function result_of(env, id)
  local v = env:query("SELECT result FROM jobs WHERE id = " .. id)[1].result
  if type(v) == "string" then v = cjson.decode(v) end
  return v
end

for _, backend in ipairs(jr.backends()) do
  local pg = backend == "postgres"
  describe(backend .. ": migration 16 (signals and durable sleep)", function()
    local env = jr.test_env(backend, { config = "concurrency = 2, lease = 1" })

    it("upgrades a schema-14 database with its jobs intact; its flows' children wait for parents, then for signals", function()
      jr.make_schema(env, 14)
      old_jobs(env)
      local before = jr.job_snapshot(env)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, jr.job_snapshot(env))
      assert.are.same({ "jobs_wait_on", "jobs_wake" }, indexes(env))
      assert.are.equal(0, new_columns(env))
      -- a runner: the parents end, their children then wait for "go"
      env:script("m16.a", "return function(job) return { n = job.payload.n } end")
      env:script("m16.b", [[
        local jobrunner = require "jobrunner"
        return function(job)
          local v = jobrunner.wait_signal("go")
          return { n = job.payload.n, by = v.by }
        end]])
      local base_stats = env:stats()
      assert.are.equal(2, base_stats.waiting)
      env:start()
      env:wait_state(1, "completed", 30)
      env:wait_state(8, "completed", 30)
      -- 3's runner is lost: its lease is rescued, it runs, 4 is released
      env:wait_state(3, "completed", 60)
      for _, id in ipairs({ 2, 4 }) do
        jr.wait_for(function()
          local r = env:query("SELECT wait_on FROM jobs WHERE id = " .. id)[1]
          return r.wait_on == "go"
        end, 30, "child " .. id .. " waiting for go")
        assert.are.equal("waiting", env:job(id).state)
      end
      -- the dead, cancelled and completed ones are as they were
      assert.are.equal("dead", env:job(5).state)
      assert.are.equal("cancelled", env:job(6).state)
      assert.are.equal("completed", env:job(7).state)
      out, err, code = env:cli("signal", "2", "go", '{"by": "cli"}')
      assert.are.equal(0, code, err)
      if pg then
        local r = env:query("SELECT signal(4, 'go', '{\"by\": \"sql\"}') AS s")[1]
        assert.are.equal("ready", r.s)
      else
        out, err, code = env:cli("signal", "4", "go", '{"by": "sql"}')
        assert.are.equal(0, code, err)
      end
      env:wait_state(2, "completed", 30)
      env:wait_state(4, "completed", 30)
      assert.are.same({ n = 2, by = "cli" }, result_of(env, 2))
      assert.are.same({ n = 4, by = "sql" }, result_of(env, 4))
      -- a finished job refuses a signal
      out, err, code = env:cli("signal", "5", "go")
      assert.are.equal(2, code, out)
      assert.truthy(err:find("the job is dead (finished)", 1, true), err)
      out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
    end)
  end)
end

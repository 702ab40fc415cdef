-- migration21_spec.lua - migration 21 (expiry and deadlines:
-- docs/queues.md). A database of schema 18 holding jobs in every state is
-- brought forward by `jobrunner migrate` with every job intact and
-- without an expiry or a deadline; the state expired is then allowed
-- (SQLite's CHECK widened in place: still refusing a state it does not
-- know), an old queued job given an expiry in the past ends expired
-- without starting, and the others run as before.
local jr = require "jr"

local function old_jobs(env)
  local past, later = jr.past_later(env)
  env:exec(([[
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts, flow,
                      parents_left, locked_by, locked_until, last_error,
                      died_at, finished_at)
    VALUES ('m21.a', '{"n": 1}', 'default', 'queued', %s, 0, 1, 0, NULL, NULL, NULL, NULL, NULL),
           ('m21.a', '{"n": 2}', 'default', 'waiting', %s, 0, 0, 1, NULL, NULL, NULL, NULL, NULL),
           ('m21.a', '{"n": 3}', 'mail', 'running', %s, 1, 0, 0, 'old-runner', %s, NULL, NULL, NULL),
           ('m21.a', '{"n": 4}', 'default', 'dead', %s, 4, 0, 0, NULL, NULL, 'boom', %s, %s),
           ('m21.a', '{"n": 5}', 'default', 'cancelled', %s, 0, 0, 0, NULL, NULL, NULL, NULL, %s),
           ('m21.a', '{"n": 6}', 'default', 'completed', %s, 1, 0, 0, NULL, NULL, NULL, NULL, %s),
           ('m21.b', '{"n": 7}', 'default', 'queued', %s, 0, 0, 0, NULL, NULL, NULL, NULL, NULL)
  ]]):format(past, past, past, later, past, past, past, past, past, past, past, past))
  env:exec("INSERT INTO job_deps (parent_id, child_id) VALUES (1, 2)")
end

local function columns(env)
  local sql = env.backend == "postgres"
    and "SELECT column_name AS name FROM information_schema.columns" ..
        " WHERE table_schema = current_schema() AND table_name = 'jobs'"
    or "SELECT name FROM pragma_table_info('jobs')"
  local t = {}
  for _, r in ipairs(env:query(sql)) do t[r.name] = true end
  return t
end

for _, backend in ipairs(jr.backends()) do
  local pg = backend == "postgres"
  describe(backend .. ": migration 21 (expiry and deadlines)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-18 database with its jobs intact; expiry works on it", function()
      jr.make_schema(env, 18)
      old_jobs(env)
      assert.is_nil(columns(env).expires_at)
      local before = jr.job_snapshot(env)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, jr.job_snapshot(env))
      local cols = columns(env)
      assert.is_true(cols.expires_at and cols.deadline and cols.deadline_at)
      assert.are.equal(0, #env:query("SELECT id FROM jobs WHERE expires_at IS NOT NULL" ..
                                     " OR deadline IS NOT NULL OR deadline_at IS NOT NULL"))
      -- the state expired is allowed, an unknown one still refused
      local bad = pg and "psql" or "sqlite3"
      out, err, code = jr.sh(pg
        and ("psql -X -q -v ON_ERROR_STOP=1 %s -c %s"):format(jr.quote(jr.pg_url),
              jr.quote(("SET search_path TO %s; UPDATE jobs SET state = 'bogus' WHERE id = 7")
                :format(env.schema)))
        or ("sqlite3 %s %s"):format(jr.quote(env:sqlite_path()),
              jr.quote("UPDATE jobs SET state = 'bogus' WHERE id = 7")))
      assert.are_not.equal(0, code, bad .. " took the state bogus")
      -- an old queued job given an expiry in the past never starts
      env:exec(pg and "UPDATE jobs SET expires_at = now() - interval '1 minute' WHERE id = 7"
               or "UPDATE jobs SET expires_at = 1000 WHERE id = 7")
      env:script("m21.b", jr.RECORD .. [[
        return function(job) record("starts", "b") end]])
      env:script("m21.a", jr.RECORD .. [[
        return function(job) record("starts", "a" .. job.payload.n) end]])
      env:start()
      env:wait_state(7, "expired", 20)
      jr.wait_for(function() return env:job(1) == nil and env:job(2) == nil end, 20,
                  "the old queued job and its child ran")
      local starts = jr.lines(env.dir .. "/starts")
      for _, s in ipairs(starts) do assert.are_not.equal("b", s) end
      assert.are.equal(1, env:stats().expired)
      env:stop()
      out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
    end)
  end)
end

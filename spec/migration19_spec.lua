-- migration19_spec.lua - migration 19 (trace context: docs/tracing.md). A
-- database of schema 18 holding jobs in every state is brought forward by
-- `jobrunner migrate` with every job intact and no trace on any; a push
-- with a trace context then stores it, and the old jobs still run. On
-- PostgreSQL the SQL producer's push takes the context by its new
-- parameters, and its earlier calls keep working.
local jr = require "jr"

local TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

local function old_jobs(env)
  local past, later = jr.past_later(env)
  env:exec(([[
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts, flow,
                      parents_left, locked_by, locked_until, last_error,
                      died_at, finished_at)
    VALUES ('m19.a', '{"n": 1}', 'default', 'queued', %s, 0, 1, 0, NULL, NULL, NULL, NULL, NULL),
           ('m19.b', '{"n": 2}', 'default', 'waiting', %s, 0, 0, 1, NULL, NULL, NULL, NULL, NULL),
           ('m19.a', '{"n": 3}', 'mail', 'running', %s, 1, 0, 0, 'old-runner', %s, NULL, NULL, NULL),
           ('m19.a', '{"n": 4}', 'default', 'dead', %s, 4, 0, 0, NULL, NULL, 'boom', %s, %s),
           ('m19.a', '{"n": 5}', 'default', 'cancelled', %s, 0, 0, 0, NULL, NULL, NULL, NULL, %s),
           ('m19.a', '{"n": 6}', 'default', 'completed', %s, 1, 0, 0, NULL, NULL, NULL, NULL, %s)
  ]]):format(past, past, past, later, past, past, past, past, past, past, past))
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
  describe(backend .. ": migration 19 (trace context)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-18 database with its jobs intact; traced pushes work on it", function()
      jr.make_schema(env, 18)
      old_jobs(env)
      assert.is_nil(columns(env).trace)
      local old_id
      if pg then    -- the SQL producer's push of schema 18
        old_id = env:query("SELECT push('m19.a', '{}', key => 'k') AS id")[1].id
      end
      local before = jr.job_snapshot(env)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, jr.job_snapshot(env))
      assert.is_true(columns(env).trace)
      assert.are.equal(0, #env:query("SELECT id FROM jobs WHERE trace IS NOT NULL"))
      -- a traced push stores its context
      out, err, code = jr.sh(("cd %s && TRACEPARENT=%s %s -c %s push m19.t")
        :format(jr.quote(env.dir), TP, jr.quote(jr.bin), jr.quote(env.config_file)))
      assert.are.equal(0, code, err)
      local id = tonumber(out:match("%d+"))
      assert.are.equal(TP, env:query("SELECT trace FROM jobs WHERE id = " .. id)[1].trace)
      if pg then
        -- the earlier calls of push, and the new parameters
        local rows = env:query("SELECT push('m19.a', '{}', key => 'k') AS id")
        assert.truthy(rows[1].id > old_id)
        rows = env:query(("SELECT push('m19.t', traceparent => '%s'," ..
                          " tracestate => 'v=1') AS id"):format(TP))
        assert.are.equal(TP .. " v=1", env:query(
          "SELECT trace FROM jobs WHERE id = " .. rows[1].id)[1].trace)
        assert.is_false((pcall(env.query, env,
          "SELECT push('m19.t', traceparent => '00-bad') AS id")))
      end
      -- the old jobs run on the new schema
      env:script("m19.a", "return function() end")
      env:script("m19.b", "return function() end")
      env:script("m19.t", "return function() end")
      env:start()
      jr.wait_for(function()
        return env:count_in("queued", "waiting") == 0 and
               env:count("running") <= 1
      end, 60, "the old jobs ran")
      assert.are.equal(0, env:stop())
    end)
  end)
end

-- migration31_spec.lua - migration 31 (PostgreSQL: room in job_deps'
-- pages for the update of each edge at its parent's end, docs/queues.md,
-- "Sequences"). A database of schema 30 holding jobs in every state (a
-- sequence's queued head and the job waiting behind it, with its edge,
-- among them) is brought forward by `jobrunner migrate` with every job
-- and edge intact and job_deps' fillfactor 50; a runner then runs the
-- sequence in order, the second job naming the first completed.
local jr = require "jr"

local WORKER = jr.RECORD .. [[
  return function(job)
    local p = {}
    for id, e in pairs(job.parents or {}) do p[#p + 1] = id .. "=" .. e.state end
    record("done", ("%d %s"):format(job.payload.n, table.concat(p, ",")))
  end]]

local function old_jobs(env)
  local past, later = jr.past_later(env)
  env:exec(([[
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                      locked_by, locked_until, last_error, died_at,
                      finished_at, sequence_key, seq_no, seq_fail,
                      parents_left, flow)
    VALUES ('m31.s', '{"n": 1}', 'default', 'queued', %s, 0, NULL, NULL, NULL, NULL, NULL, 'q', 1, 'block', 0, 1),
           ('m31.s', '{"n": 2}', 'default', 'waiting', %s, 0, NULL, NULL, NULL, NULL, NULL, 'q', 2, 'block', 1, 0),
           ('m31.a', '{"n": 3}', 'mail', 'running', %s, 1, 'old-runner', %s, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0),
           ('m31.a', '{"n": 4}', 'default', 'dead', %s, 4, NULL, NULL, 'boom', %s, %s, NULL, NULL, NULL, 0, 0),
           ('m31.a', '{"n": 5}', 'default', 'cancelled', %s, 0, NULL, NULL, NULL, NULL, %s, NULL, NULL, NULL, 0, 0),
           ('m31.a', '{"n": 6}', 'default', 'completed', %s, 1, NULL, NULL, NULL, NULL, %s, NULL, NULL, NULL, 0, 0)
  ]]):format(past, past, past, later, past, past, past, past, past, past, past))
  env:exec("INSERT INTO job_deps (parent_id, child_id) VALUES (1, 2)")
end

for _, backend in ipairs(jr.backends()) do
  if backend == "postgres" then
  describe(backend .. ": migration 31 (room for job_deps' updates)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-30 database with its jobs and edges intact; the sequence runs in order", function()
      jr.make_schema(env, 30)
      old_jobs(env)
      local before = jr.job_snapshot(env)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, jr.job_snapshot(env))
      assert.are.same({ { parent_id = 1, child_id = 2 } },
                      env:query("SELECT parent_id, child_id FROM job_deps"))
      assert.are.same({ { o = "{fillfactor=50}" } },
                      env:query("SELECT reloptions::text AS o FROM pg_class"
                                .. " WHERE oid = to_regclass('job_deps')"))
      env:script("m31.s", WORKER)
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/done") == 2 end,
                  60, "the sequence's two jobs done")
      assert.equal(0, env:stop())
      assert.are.same({ "1 ", "2 1=completed" }, jr.lines(env.dir .. "/done"))
    end)
  end)
  end
end

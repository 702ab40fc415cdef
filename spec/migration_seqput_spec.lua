-- migration_seqput_spec.lua - PostgreSQL's migration 35 (sequence_put
-- waits for the last job that holds a sequence when the one pushed last
-- was cancelled before the jobs ahead of it, docs/queues.md,
-- "Sequences"). A database of schema 34 holding a sequence whose head is
-- queued, its second job waiting and its last cancelled, beside jobs in
-- other states, is brought forward by `jobrunner migrate` with every job
-- and edge intact; a push into the sequence then waits behind the second
-- job, and a runner runs the three in order.
local jr = require "jr"

local WORKER = jr.RECORD .. [[
  return function(job) record("done", tostring(job.payload.n)) end]]

local function old_jobs(env)
  local past, later = jr.past_later(env)
  env:exec(([[
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                      locked_by, locked_until, last_error, died_at,
                      finished_at, sequence_key, seq_no, seq_fail,
                      parents_left, flow)
    VALUES ('mq.s', '{"n": 1}', 'default', 'queued', %s, 0, NULL, NULL, NULL, NULL, NULL, 'q', 1, 'block', 0, 1),
           ('mq.s', '{"n": 2}', 'default', 'waiting', %s, 0, NULL, NULL, NULL, NULL, NULL, 'q', 2, 'block', 1, 1),
           ('mq.s', '{"n": 3}', 'default', 'cancelled', %s, 0, NULL, NULL, NULL, NULL, %s, 'q', 3, 'block', 1, 0),
           ('mq.a', '{"n": 4}', 'mail', 'running', %s, 1, 'old-runner', %s, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0),
           ('mq.a', '{"n": 5}', 'default', 'dead', %s, 4, NULL, NULL, 'boom', %s, %s, NULL, NULL, NULL, 0, 0)
  ]]):format(past, past, past, past, past, later, past, past, past))
  env:exec("INSERT INTO job_deps (parent_id, child_id) VALUES (1, 2), (2, 3)")
end

for _, backend in ipairs(jr.backends()) do
  if backend == "postgres" then
  describe(backend .. ": migration 35 (a push after a cancelled last job)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-34 database intact; a push waits behind the job that holds the sequence", function()
      jr.make_schema(env, 34)
      old_jobs(env)
      local before = jr.job_snapshot(env)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, jr.job_snapshot(env))
      assert.are.same({ { parent_id = 1, child_id = 2 }, { parent_id = 2, child_id = 3 } },
                      env:query("SELECT parent_id, child_id FROM job_deps ORDER BY parent_id"))
      local id = env:push("mq.s", '{"n": 6}', "--sequence", "q")
      assert.equal("waiting", env:job(id).state)
      assert.are.same({ { parent_id = 2 } },
                      env:query("SELECT parent_id FROM job_deps WHERE child_id = " .. id))
      env:script("mq.s", WORKER)
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/done") == 3 end,
                  60, "the sequence's three jobs done")
      assert.equal(0, env:stop())
      assert.are.same({ "1", "2", "6" }, jr.lines(env.dir .. "/done"))
    end)
  end)
  end
end

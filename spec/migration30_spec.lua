-- migration30_spec.lua - migration 30 (PostgreSQL: a batch's callbacks
-- carry the trace context of the member whose end finished the batch:
-- docs/tracing.md, "Flows and batch callbacks"). A database of schema 23
-- holding jobs in every state is brought forward by `jobrunner migrate`
-- with every job intact; then a flow pushed with a trace context and its
-- members ended: the batch's callback stores the member's context.
local jr = require "jr"

local TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

local function old_jobs(env)
  local past, later = jr.past_later(env)
  env:exec(([[
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                      locked_by, locked_until, last_error, died_at,
                      finished_at, trace)
    VALUES ('m30.a', '{"n": 1}', 'default', 'queued', %s, 0, NULL, NULL, NULL, NULL, NULL, '%s'),
           ('m30.a', '{"n": 2}', 'mail', 'running', %s, 1, 'old-runner', %s, NULL, NULL, NULL, NULL),
           ('m30.a', '{"n": 3}', 'default', 'dead', %s, 4, NULL, NULL, 'boom', %s, %s, NULL),
           ('m30.a', '{"n": 4}', 'default', 'cancelled', %s, 0, NULL, NULL, NULL, NULL, %s, NULL),
           ('m30.a', '{"n": 5}', 'default', 'completed', %s, 1, NULL, NULL, NULL, NULL, %s, NULL),
           ('m30.b', '{"n": 6}', 'default', 'waiting', %s, 0, NULL, NULL, NULL, NULL, NULL, NULL)
  ]]):format(past, TP, past, later, past, past, past, past, past, past, past, past))
end

for _, backend in ipairs(jr.backends()) do
  if backend == "postgres" then
  describe(backend .. ": migration 30 (batch callbacks in their member's trace)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-23 database with its jobs intact; a callback takes its member's context", function()
      jr.make_schema(env, 23)
      old_jobs(env)
      local before = jr.job_snapshot(env)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, jr.job_snapshot(env))
      assert.are.same({ { trace = TP } }, env:query("SELECT trace FROM jobs WHERE id = 1"))
      local f = env.dir .. "/flow.json"
      jr.write_file(f, [[{"jobs": [{"ref": "a", "name": "m30.c"}],
                         "batch": {"on_complete": "m30.done"}}]])
      out, err, code = jr.sh(("cd %s && TRACEPARENT=%s %s -c %s push-flow %s")
        :format(jr.quote(env.dir), TP, jr.quote(jr.bin),
                jr.quote(env.config_file), jr.quote(f)))
      assert.are.equal(0, code, err)
      local a = tonumber(out:match("a (%d+)"))
      env:exec("UPDATE jobs SET state = 'completed', finished_at = now() WHERE id = " .. a)
      assert.are.same({ { trace = TP } },
                      env:query("SELECT trace FROM jobs WHERE name = 'm30.done'"))
      out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
    end)
  end)
  end
end

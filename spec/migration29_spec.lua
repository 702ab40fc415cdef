-- migration29_spec.lua - fair share keyed by a job name (docs/queues.md,
-- "Fair share"): migration 29 on SQLite, 32 on PostgreSQL (fair_names,
-- and the key's path read by jobs_fair_key / jobs_queue_known). A
-- database of the schema before (SQLite 26, PostgreSQL 31) holding jobs
-- in every state, some in a fair queue, is brought forward by `jobrunner
-- migrate` with every job intact and an empty fair_names; a path
-- recorded there then keys a pushed job of its name in the fair queue at
-- it, from the CLI and from plain SQL, another name's at the queue's.
local jr = require "jr"

local function old_jobs(env)
  local past, later = jr.past_later(env)
  local pg = env.backend == "postgres"
  env:exec(([[
    INSERT INTO fair_paths (queue, path) VALUES ('fq', '%s');
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                      locked_by, locked_until, last_error, died_at,
                      finished_at, fair_key)
    VALUES ('m29.a', '{"t": "x", "tenant": "a"}', 'fq', 'queued', %s, 0, NULL, NULL, NULL, NULL, NULL, 'x'),
           ('m29.a', '{"n": 2}', 'mail', 'running', %s, 1, 'old-runner', %s, NULL, NULL, NULL, NULL),
           ('m29.a', '{"n": 3}', 'default', 'dead', %s, 4, NULL, NULL, 'boom', %s, %s, NULL),
           ('m29.a', '{"n": 4}', 'default', 'cancelled', %s, 0, NULL, NULL, NULL, NULL, %s, NULL),
           ('m29.a', '{"n": 5}', 'default', 'completed', %s, 1, NULL, NULL, NULL, NULL, %s, NULL),
           ('m29.b', '{"n": 6}', 'default', 'waiting', %s, 0, NULL, NULL, NULL, NULL, NULL, NULL)
  ]]):format(pg and "{t}" or "$.t", past, past, later, past, past, past, past, past,
             past, past, past))
end

local function key_of(env, id)
  return env:query("SELECT fair_key AS k FROM jobs WHERE id = " .. math.tointeger(id))[1].k
end

for _, backend in ipairs(jr.backends()) do
  local pg = backend == "postgres"
  describe(backend .. ": migration " .. (pg and 32 or 29) .. " (fair share keyed by a job name)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades the previous schema with its jobs intact; a recorded path keys a push", function()
      jr.make_schema(env, pg and 31 or 26)
      old_jobs(env)
      local before = jr.job_snapshot(env)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, jr.job_snapshot(env))
      assert.are.equal(0, #env:query("SELECT name FROM fair_names"))
      -- what a runner with `fair = "payload.tenant"` in m29.a's handler writes
      env:exec(("INSERT INTO fair_names (name, path) VALUES ('m29.a', '%s')")
        :format(pg and "{tenant}" or "$.tenant"))
      out, err, code = env:cli("push", "m29.a", '{"t": "x", "tenant": "b"}', "--queue", "fq")
      assert.are.equal(0, code, err)
      assert.are.equal("b", key_of(env, tonumber(out)))
      out, err, code = env:cli("push", "m29.z", '{"t": "x", "tenant": "b"}', "--queue", "fq")
      assert.are.equal(0, code, err)
      assert.are.equal("x", key_of(env, tonumber(out)))
      -- another program's INSERT
      env:exec("INSERT INTO jobs (name, payload, queue) VALUES"
        .. " ('m29.a', '{\"t\": \"x\", \"tenant\": \"c\"}', 'fq')")
      assert.are.same({ { k = "c" } }, env:query("SELECT fair_key AS k FROM jobs"
        .. " WHERE payload " .. (pg and "->> 'tenant'" or "->> '$.tenant'") .. " = 'c'"))
    end)
  end)
end

-- migration_fairname_spec.lua - a job name's own fair weights
-- (docs/queues.md, "A name's own weights"): migration 31 on SQLite, 34
-- on PostgreSQL (fair_names' weights and default, fair_name_keys, the
-- keying of a name's jobs in its scope and of a queue it makes fair). A
-- database of the schema before holding jobs in every state is brought
-- forward by `jobrunner migrate` with every job intact; a runner whose
-- handler has fair weights then makes their queue fair, keys its queued
-- jobs in the name's scope, and runs them.
local jr = require "jr"

local WORKER = jr.RECORD .. [[
  return { fair = { key = "payload.t", weights = { a = 3 } },
    handle = function(job) record("done", job.payload.n) end }]]

local function old_jobs(env)
  local past, later = jr.past_later(env)
  env:exec(([[
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                      locked_by, locked_until, last_error, died_at,
                      finished_at)
    VALUES ('mfn.w', '{"n": 1, "t": "a"}', 'mq', 'queued', %s, 0, NULL, NULL, NULL, NULL, NULL),
           ('mfn.w', '{"n": 2, "t": "b"}', 'mq', 'queued', %s, 0, NULL, NULL, NULL, NULL, NULL),
           ('mfn.x', '{"n": 3}', 'mq', 'running', %s, 1, 'old-runner', %s, NULL, NULL, NULL),
           ('mfn.w', '{"n": 4}', 'mq', 'dead', %s, 4, NULL, NULL, 'boom', %s, %s),
           ('mfn.w', '{"n": 5}', 'mq', 'cancelled', %s, 0, NULL, NULL, NULL, NULL, %s),
           ('mfn.w', '{"n": 6}', 'mq', 'completed', %s, 1, NULL, NULL, NULL, NULL, %s),
           ('mfn.x', '{"n": 7}', 'mq', 'waiting', %s, 0, NULL, NULL, NULL, NULL, NULL)
  ]]):format(past, past, past, later, past, past, past, past, past, past,
             past, past))
end

for _, backend in ipairs(jr.backends()) do
  local before_v = backend == "postgres" and 33 or 30
  local v = backend == "postgres" and 34 or 31
  describe(backend .. ": migration " .. v .. " (a name's own fair weights)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-" .. before_v .. " database with its jobs intact; a name's weights then key and run them", function()
      jr.make_schema(env, before_v)
      old_jobs(env)
      local before = jr.job_snapshot(env)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, jr.job_snapshot(env))
      assert.are.same({}, env:query("SELECT name, key, weight FROM fair_name_keys"))
      env:config("concurrency = 1")
      env:script("mfn.w", WORKER)
      assert.equal(0, select(3, env:cli("queue", "pause", "mq")))
      env:start()
      jr.wait_for(function()
        return #env:query("SELECT queue FROM fair_paths WHERE queue = 'mq'") == 1
      end, 30, "the runner made mq fair by the name's jobs")
      local keys = {}
      for _, r in ipairs(env:query("SELECT id, fair_key AS k FROM jobs"
        .. " WHERE id IN (1, 2, 7) ORDER BY id")) do
        keys[#keys + 1] = r.k
      end
      assert.are.same({ "mfn.w\31a", "mfn.w\31b", "" }, keys)
      assert.equal(0, select(3, env:cli("queue", "resume", "mq")))
      jr.wait_for(function() return #jr.lines(env.dir .. "/done") == 2 end,
                  60, "the name's two queued jobs done")
      assert.equal(0, env:stop())
    end)
  end)
end

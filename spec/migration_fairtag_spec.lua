-- migration_fairtag_spec.lua - fair share by start tags (docs/queues.md,
-- "Fair share"): migration 30 on SQLite, 33 on PostgreSQL (jobs.fair_tag,
-- jobs_fairtag and jobs_fairnew in place of the walk's jobs_fair, the
-- config's weights in fair_keys and fair_paths; on PostgreSQL the insert
-- trigger's function jobs_queue_known tags). A database of the schema
-- before (SQLite 29, PostgreSQL 32) holding jobs in
-- every state of a fair queue, with a key's pass, is brought forward by
-- `jobrunner migrate` with every job intact, its queued jobs tagged (the
-- ended and running ones not: the weights recorded anew, every key
-- starts again from the queue's clock), and a runner then runs the jobs
-- queued before the upgrade.
local jr = require "jr"

local WORKER = jr.RECORD .. [[
  return function(job) record("done", job.payload.n) end]]

local function old_jobs(env)
  local past, later = jr.past_later(env)
  env:exec(([[
    INSERT INTO fair_paths (queue, path) VALUES ('fq', '%s');
    INSERT INTO fair_keys (queue, key, pass) VALUES ('fq', 'a', 3);
    INSERT INTO fair_clocks (queue, clock, cursor) VALUES ('fq', 2, 'a');
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                      locked_by, locked_until, last_error, died_at,
                      finished_at, fair_key)
    VALUES ('mft.a', '{"t": "a", "n": 1}', 'fq', 'queued', %s, 0, NULL, NULL, NULL, NULL, NULL, 'a'),
           ('mft.a', '{"t": "b", "n": 2}', 'fq', 'queued', %s, 0, NULL, NULL, NULL, NULL, NULL, 'b'),
           ('mft.a', '{"t": "a", "n": 3}', 'fq', 'running', %s, 1, 'old-runner', %s, NULL, NULL, NULL, 'a'),
           ('mft.a', '{"t": "a", "n": 4}', 'fq', 'dead', %s, 4, NULL, NULL, 'boom', %s, %s, 'a'),
           ('mft.a', '{"t": "b", "n": 5}', 'fq', 'cancelled', %s, 0, NULL, NULL, NULL, NULL, %s, 'b'),
           ('mft.a', '{"t": "b", "n": 6}', 'fq', 'completed', %s, 1, NULL, NULL, NULL, NULL, %s, 'b'),
           ('mft.a', '{"t": "b", "n": 7}', 'fq', 'waiting', %s, 0, NULL, NULL, NULL, NULL, NULL, 'b')
  ]]):format(env.backend == "postgres" and "{t}" or "$.t", past, past, past,
             later, past, past, past, past, past, past, past, past))
end

for _, backend in ipairs(jr.backends()) do
  local pg = backend == "postgres"
  describe(backend .. ": migration " .. (pg and 33 or 30) .. " (fair share by start tags)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades the previous schema with its fair jobs intact and tagged; they run", function()
      jr.make_schema(env, pg and 32 or 29)
      old_jobs(env)
      local before = jr.job_snapshot(env)
      env:config([[concurrency = 1,
        limits = { ["queue:fq"] = { fair = { key = "payload.t" } } }]])
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, jr.job_snapshot(env))
      -- the queued jobs tagged from the clock (the config's weights were
      -- recorded: a's old pass is not kept), the others not
      assert.are.same({ { n = 1, tag = 2 }, { n = 2, tag = 2 } },
        env:query("SELECT (payload ->> " .. (pg and "'n')::int" or "'$.n')")
          .. " AS n, fair_tag AS tag FROM jobs WHERE fair_tag IS NOT NULL ORDER BY id"))
      assert.are.same({ { i = 0 } }, env:query(pg and
        "SELECT count(*)::int AS i FROM pg_indexes WHERE indexname = 'jobs_fair'"
        .. " AND schemaname = current_schema()" or
        "SELECT count(*) AS i FROM sqlite_schema WHERE name = 'jobs_fair'"))
      env:script("mft.a", WORKER)
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/done") == 2 end,
                  60, "the two queued jobs done")
      assert.equal(0, env:stop())
      -- equal tags: in id order
      assert.are.same({ "1", "2" }, jr.lines(env.dir .. "/done"))
    end)
  end)
end

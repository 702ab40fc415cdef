-- migration35_spec.lua - SQLite migration 35 (docs/performance.md, "The
-- plain drain beside the baseline"): jobs_cancel, jobs_fairtag and
-- jobs_fairnew made again with their feature's term first in their
-- condition (the same rows, columns and uses; a plain job's claim and
-- end fail each condition at its first term). A database of the schema
-- before holding jobs in every state (a fair queue's tagged and untagged
-- jobs, a running job asked to cancel) is brought forward by `jobrunner
-- migrate` with every job intact and in the same indexes, and a runner
-- then runs the jobs queued before the upgrade. SQLite only: PostgreSQL's
-- schema does not change.
local jr = require "jr"

local WORKER = jr.RECORD .. [[
  return function(job) record("done", job.payload.n) end]]

local BEFORE = 31       -- SQLite's schema before this migration

local function old_jobs(env)
  local past, later = jr.past_later(env)
  env:exec(([[
    INSERT INTO fair_paths (queue, path) VALUES ('fq', '$.t');
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                      locked_by, locked_until, last_error, died_at,
                      finished_at, cancel_requested, fair_key, fair_tag)
    VALUES ('m35.a', '{"t": "a", "n": 1}', 'fq', 'queued', %s, 0, NULL, NULL, NULL, NULL, NULL, 0, 'a', 2),
           ('m35.a', '{"t": "b", "n": 2}', 'fq', 'queued', %s, 0, NULL, NULL, NULL, NULL, NULL, 0, 'b', NULL),
           ('m35.a', '{"n": 3}', 'default', 'queued', %s, 0, NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL),
           ('m35.a', '{"n": 4}', 'default', 'running', %s, 1, 'old-runner', %s, NULL, NULL, NULL, 1, NULL, NULL),
           ('m35.a', '{"n": 5}', 'default', 'running', %s, 1, 'old-runner', %s, NULL, NULL, NULL, 0, NULL, NULL),
           ('m35.a', '{"n": 6}', 'default', 'dead', %s, 4, NULL, NULL, 'boom', %s, %s, 0, NULL, NULL),
           ('m35.a', '{"n": 7}', 'default', 'cancelled', %s, 0, NULL, NULL, NULL, NULL, %s, 0, NULL, NULL),
           ('m35.a', '{"n": 8}', 'default', 'completed', %s, 1, NULL, NULL, NULL, NULL, %s, 0, NULL, NULL),
           ('m35.a', '{"n": 9}', 'default', 'waiting', %s, 0, NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL)
  ]]):format(past, past, past, past, later, past, later, past, past, past,
             past, past, past, past, past))
end

-- the ids each of the three indexes holds, read through it
local function in_indexes(env)
  local function ids(sql)
    local t = {}
    for _, r in ipairs(env:query(sql)) do t[#t + 1] = r.id end
    return t
  end
  return {
    cancel = ids("SELECT id FROM jobs INDEXED BY jobs_cancel WHERE"
      .. " locked_by = 'old-runner' AND state = 'running'"
      .. " AND cancel_requested = 1 ORDER BY id"),
    -- migration 45: the tagged jobs are in jobs_claim, by their tags
    tagged = ids("SELECT id FROM jobs INDEXED BY jobs_claim WHERE"
      .. " queue = 'fq' AND state = 'queued' AND fair_tag IS NOT NULL"
      .. " ORDER BY id"),
    untagged = ids("SELECT id FROM jobs INDEXED BY jobs_fairnew WHERE"
      .. " queue = 'fq' AND state = 'queued' AND fair_key IS NOT NULL"
      .. " AND fair_tag IS NULL ORDER BY id"),
  }
end

for _, backend in ipairs(jr.backends()) do
  if backend == "sqlite" then
    describe("sqlite: migration 35 (partial indexes' feature term first)", function()
      local env
      before_each(function() env = jr.env(backend) end)
      after_each(function() env:cleanup() end)

      it("upgrades a schema-" .. BEFORE .. " database with its jobs intact and indexed; they run", function()
        jr.make_schema(env, BEFORE)
        old_jobs(env)
        local before = jr.job_snapshot(env)
        local out, err, code = env:cli("migrate")
        assert.are.equal(0, code, out .. err)
        assert.are.same(before, jr.job_snapshot(env))
        assert.is_true(env:query("PRAGMA user_version")[1].user_version >= 35)
        local defs = {}
        for _, r in ipairs(env:query("SELECT name, sql FROM sqlite_schema"
          .. " WHERE name IN ('jobs_cancel', 'jobs_fairtag', 'jobs_fairnew')")) do
          defs[r.name] = r.sql:match("WHERE%s+(.-)$"):gsub("%s+", " ")
        end
        assert.are.same({
          -- migration 44 keeps only the feature's term of jobs_cancel;
          -- migration 45 makes jobs_claim the fair queues' index too
          jobs_cancel = "cancel_requested = 1",
          jobs_fairnew = "fair_key IS NOT NULL AND fair_tag IS NULL AND state = 'queued'",
        }, defs)
        assert.are.same({ cancel = { 4 }, tagged = { 1 }, untagged = { 2 } },
                        in_indexes(env))
        assert.are.same({ { r = "ok" } }, env:query("SELECT integrity_check AS r FROM pragma_integrity_check"))
        env:config("concurrency = 1")
        env:script("m35.a", WORKER)
        env:start()
        jr.wait_for(function() return #jr.lines(env.dir .. "/done") == 3 end,
                    60, "the three queued jobs done")
        assert.equal(0, env:stop())
        local done = jr.lines(env.dir .. "/done")
        table.sort(done)
        assert.are.same({ "1", "2", "3" }, done)
        -- ended, none left in the fair indexes
        local after = in_indexes(env)
        assert.are.same({}, after.tagged)
        assert.are.same({}, after.untagged)
      end)
    end)
  end
end

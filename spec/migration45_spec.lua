-- migration45_spec.lua - SQLite migration 45 (docs/performance.md, "What
-- features cost"): jobs_claim orders a queue's queued jobs by (priority,
-- coalesce(fair_tag, run_at), id) and jobs_fairtag is gone, so a fair
-- job is one entry of one claim index, as a plain job is. A database of
-- the schema before holding a plain queue's and a fair queue's jobs (one
-- of them not yet due, untagged) is brought forward by `jobrunner
-- migrate` with every job intact; the index holds every queued job; the
-- claims' reads use it without a sort (their query plans say so) and
-- read a plain queue by (priority, run_at, id), a fair queue's tagged
-- jobs by (priority, tag, id) and its untagged ones after them; a runner
-- then runs the plain queue's jobs in that order and the fair queue's
-- due ones. SQLite only: PostgreSQL's schema does not change.
local jr = require "jr"

local WORKER = jr.RECORD .. [[
  return function(job) record("done", job.payload.n) end]]

local BEFORE = 44       -- SQLite's schema before this migration

-- ids 1..9: the plain queue's 1..5 (5 running; the claim order 3, 2, 1, 4:
-- priority, then run_at, then id), the fair queue's 6..9 (tagged 6, 7,
-- 8 by tag order 8, 6, 7; 9 not yet due, untagged)
local function old_jobs(env)
  local past, later = jr.past_later(env)
  local p1, p2 = past .. " - 20", past .. " - 10"
  env:exec(([[
    INSERT INTO fair_paths (queue, path) VALUES ('fq', '$.t');
    INSERT INTO fair_clocks (queue, clock, cursor) VALUES ('fq', 0, NULL);
    INSERT INTO jobs (name, payload, queue, state, priority, run_at,
                      attempts, locked_by, locked_until, fair_key, fair_tag,
                      fair_w)
    VALUES ('m45.a', '{"n": 1}', 'default', 'queued', 1, %s, 0, NULL, NULL, NULL, NULL, NULL),
           ('m45.a', '{"n": 2}', 'default', 'queued', 0, %s, 0, NULL, NULL, NULL, NULL, NULL),
           ('m45.a', '{"n": 3}', 'default', 'queued', 0, %s, 0, NULL, NULL, NULL, NULL, NULL),
           ('m45.a', '{"n": 4}', 'default', 'queued', 1, %s, 0, NULL, NULL, NULL, NULL, NULL),
           ('m45.a', '{"n": 5}', 'default', 'running', 0, %s, 1, 'old-runner', %s, NULL, NULL, NULL),
           ('m45.f', '{"t": "a", "n": 6}', 'fq', 'queued', 0, %s, 0, NULL, NULL, 'a', 1.5, 1),
           ('m45.f', '{"t": "a", "n": 7}', 'fq', 'queued', 0, %s, 0, NULL, NULL, 'a', 2.5, 1),
           ('m45.f', '{"t": "b", "n": 8}', 'fq', 'queued', 0, %s, 0, NULL, NULL, 'b', 0.5, 1),
           ('m45.f', '{"t": "b", "n": 9}', 'fq', 'queued', 0, %s, 0, NULL, NULL, 'b', NULL, NULL)
  ]]):format(p2, p2, p1, p2, p1, later, p2, p1, p1, later))
end

local ids = jr.ids

local plan = jr.sqlite_plan

local ORDER = " ORDER BY priority, coalesce(fair_tag, run_at), id"

for _, backend in ipairs(jr.backends()) do
  if backend == "sqlite" then
    describe("sqlite: migration 45 (one claim index for plain and fair queues)", function()
      local env
      before_each(function() env = jr.env(backend) end)
      after_each(function() env:cleanup() end)

      it("upgrades a schema-" .. BEFORE .. " database with its jobs intact; the claims read one index in order; they run", function()
        local before, after = jr.upgrade_intact(env, BEFORE, old_jobs)
        assert.are.same(before, after)
        assert.is_true(env:query("PRAGMA user_version")[1].user_version >= 45)
        assert.are.same({ { r = "ok" } }, env:query("SELECT integrity_check AS r FROM pragma_integrity_check"))
        assert.are.same({}, env:query("SELECT name FROM sqlite_schema WHERE name = 'jobs_fairtag'"))
        local def = env:query("SELECT sql FROM sqlite_schema WHERE name = 'jobs_claim'")[1].sql
        assert.truthy(def:find("coalesce(fair_tag, run_at)", 1, true), def)

        -- every queued job is in it, in claim order
        assert.are.same({ 3, 2, 1, 4 }, ids(env, "SELECT id FROM jobs INDEXED BY jobs_claim"
          .. " WHERE queue = 'default' AND state = 'queued'" .. ORDER))
        assert.are.same({ 8, 6, 7, 9 }, ids(env, "SELECT id FROM jobs INDEXED BY jobs_claim"
          .. " WHERE queue = 'fq' AND state = 'queued'" .. ORDER))
        assert.are.same({ 8, 6, 7 }, ids(env, "SELECT id FROM jobs INDEXED BY jobs_claim"
          .. " WHERE queue = 'fq' AND state = 'queued' AND fair_tag IS NOT NULL" .. ORDER))

        -- the claims' reads (claim.c, candidates.c, aging.c, fair.c,
        -- fairclaim.c) read it in order: no sort
        for _, sql in ipairs({
          "SELECT id FROM jobs WHERE state = 'queued' AND queue = 'default' AND run_at <= 1e12"
            .. " AND name IN (SELECT value FROM json_each('[\"m45.a\"]'))" .. ORDER .. " LIMIT 10",
          "SELECT id FROM jobs WHERE state = 'queued' AND queue = 'fq' AND fair_tag IS NOT NULL"
            .. " AND run_at <= 1e12 AND name IN (SELECT value FROM json_each('[\"m45.f\"]'))"
            .. ORDER .. " LIMIT 10",
          "SELECT id FROM jobs WHERE state = 'queued' AND queue = 'default' AND priority = 1"
            .. " AND run_at <= 1e12 ORDER BY coalesce(fair_tag, run_at), id LIMIT 10",
          "SELECT 1 FROM jobs WHERE state = 'queued' AND queue = 'fq' AND run_at <= 1e12 LIMIT 1",
        }) do
          local p = plan(env, sql)
          assert.truthy(p:find("INDEX jobs_claim", 1, true), sql .. ": " .. p)
          assert.falsy(p:find("TEMP B-TREE", 1, true), sql .. ": " .. p)
        end

        -- a runner: the plain queue's jobs one at a time in claim order,
        -- the fair queue's due ones (the old runner's job is its own)
        env:config([[concurrency = 1,
          limits = { ["queue:fq"] = { fair = { key = "payload.t" } } }]])
        env:script("m45.a", WORKER)
        env:script("m45.f", WORKER)
        env:start()
        jr.wait_for(function() return #jr.lines(env.dir .. "/done") == 7 end,
                    60, "the seven due queued jobs done")
        assert.equal(0, env:stop())
        local plain, fair = {}, {}
        for _, n in ipairs(jr.lines(env.dir .. "/done")) do
          local t = tonumber(n) <= 5 and plain or fair
          t[#t + 1] = n
        end
        assert.are.same({ "3", "2", "1", "4" }, plain)
        table.sort(fair)
        assert.are.same({ "6", "7", "8" }, fair)
        assert.are.same({ { state = "queued" } },
          env:query("SELECT state FROM jobs WHERE id = 9"))
      end)
    end)
  end
end

-- migration44_spec.lua - SQLite migration 44 (docs/performance.md,
-- "What features cost"): the ended states' four indexes become jobs_ended
-- (state, finished_at) and jobs_died (died_at), each kept only for rows
-- with that time; jobs_expiry and jobs_cancel test only their feature's
-- column. A plain job's claim opens 8 indexes instead of 11 and its end
-- 14 instead of 16. A database of the schema before holding jobs in every
-- state (a dead one plain SQL left without died_at among them) is brought
-- forward by `jobrunner migrate` with every job intact (that one dies
-- then, as a row plain SQL makes dead does from then on); each new index
-- holds the rows it must, the statements that read the old ones read the
-- new ones (their query plans say so), `dead list` and `dead retry --all`
-- see both dead jobs, the prunes end what they ended before, and a runner
-- runs the queued jobs and ends the expired one. SQLite only: PostgreSQL's
-- schema does not change.
local jr = require "jr"

local WORKER = jr.RECORD .. [[
  return function(job) record("done", job.payload.n) end]]

local BEFORE = 43       -- SQLite's schema before this migration

-- ids 1..10, in this order
local function old_jobs(env)
  local past, later = jr.past_later(env)
  local long_ago = "1000000"      -- 1970-01-12: past every retention
  env:exec(([[
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                      locked_by, locked_until, last_error, died_at,
                      finished_at, cancel_requested, expires_at, updated_at)
    VALUES ('m44.a', '{"n": 1}', 'default', 'queued', %s, 0, NULL, NULL, NULL, NULL, NULL, 0, NULL, %s),
           ('m44.a', '{"n": 2}', 'default', 'queued', %s, 0, NULL, NULL, NULL, NULL, NULL, 0, %s, %s),
           ('m44.a', '{"n": 3}', 'default', 'queued', %s, 0, NULL, NULL, NULL, NULL, NULL, 0, 4102444800, %s),
           ('m44.a', '{"n": 4}', 'default', 'running', %s, 1, 'old-runner', %s, NULL, NULL, NULL, 1, NULL, %s),
           ('m44.a', '{"n": 5}', 'default', 'running', %s, 1, 'old-runner', %s, NULL, NULL, NULL, 0, NULL, %s),
           ('m44.a', '{"n": 6}', 'default', 'dead', %s, 4, NULL, NULL, 'boom', %s, %s, 0, NULL, %s),
           ('m44.a', '{"n": 7}', 'q.dead', 'dead', %s, 2, NULL, NULL, 'by hand', NULL, NULL, 0, NULL, 2000000),
           ('m44.a', '{"n": 8}', 'default', 'cancelled', %s, 0, NULL, NULL, NULL, NULL, %s, 1, NULL, %s),
           ('m44.a', '{"n": 9}', 'default', 'completed', %s, 1, NULL, NULL, NULL, NULL, %s, 0, NULL, %s),
           ('m44.a', '{"n": 10}', 'default', 'expired', %s, 0, NULL, NULL, 'expired', NULL, %s, 0, %s, %s)
  ]]):format(past, past,
             past, past, past,
             past, past,
             past, later, past,
             past, later, past,
             past, long_ago, long_ago, past,
             past,
             past, long_ago, past,
             past, long_ago, past,
             past, long_ago, long_ago, past))
end

local ids = jr.ids

-- the ids each new index holds, read through it
local function in_indexes(env)
  local function by(index, where)
    return ids(env, ("SELECT id FROM jobs INDEXED BY %s WHERE %s ORDER BY id"):format(index, where))
  end
  return {
    ended = by("jobs_ended", "finished_at IS NOT NULL"),
    died = by("jobs_died", "died_at IS NOT NULL"),
    expiry = by("jobs_expiry", "expires_at IS NOT NULL"),
    cancel = by("jobs_cancel", "cancel_requested = 1"),
  }
end

local plan = jr.sqlite_plan

for _, backend in ipairs(jr.backends()) do
  if backend == "sqlite" then
    describe("sqlite: migration 44 (fewer indexes for a claim and an end)", function()
      local env
      before_each(function() env = jr.env(backend) end)
      after_each(function() env:cleanup() end)

      it("upgrades a schema-" .. BEFORE .. " database with its jobs intact and indexed; they run", function()
        local before, after = jr.upgrade_intact(env, BEFORE, old_jobs)
        assert.are.same(before, after)
        assert.is_true(env:query("PRAGMA user_version")[1].user_version >= 44)
        assert.are.same({ { r = "ok" } }, env:query("SELECT integrity_check AS r FROM pragma_integrity_check"))

        -- the old indexes are gone, the new ones hold their rows
        assert.are.same({}, env:query("SELECT name FROM sqlite_schema WHERE name IN"
          .. " ('jobs_dead', 'jobs_completed', 'jobs_cancelled', 'jobs_expired')"))
        -- the dead job plain SQL left without died_at dies at the upgrade
        -- (never pruned before, it is kept a retention from now)
        local t0 = os.time()
        local d7 = env:query("SELECT died_at FROM jobs WHERE id = 7")[1].died_at
        assert.is_true(d7 >= t0 - 30 and d7 <= t0 + 5, tostring(d7))
        assert.are.same({ ended = { 6, 8, 9, 10 }, died = { 6, 7 }, expiry = { 2, 3, 10 },
                          cancel = { 4, 8 } }, in_indexes(env))

        -- the statements that read the old indexes read the new ones
        for _, c in ipairs({
          { "jobs_ended", "SELECT id FROM jobs WHERE state = 'completed' AND finished_at < 5 AND keep_until IS NULL LIMIT 10" },
          { "jobs_ended", "SELECT id FROM jobs WHERE state = 'cancelled' AND finished_at < 5 LIMIT 10" },
          { "jobs_ended", "SELECT id FROM jobs WHERE state = 'expired' AND finished_at < 5 LIMIT 10" },
          { "jobs_died", "SELECT id FROM jobs WHERE state = 'dead' AND died_at < 5 LIMIT 10" },
          { "jobs_died", "SELECT id FROM jobs WHERE died_at IS NOT NULL AND state = 'dead' ORDER BY died_at DESC, id DESC LIMIT 5" },
          { "jobs_cancel", "SELECT id FROM jobs WHERE state = 'running' AND cancel_requested = 1 AND locked_by = 'x' ORDER BY id LIMIT 5" },
          { "jobs_expiry", "SELECT 1 FROM jobs WHERE expires_at <= 5 AND expires_at IS NOT NULL AND state = 'queued' AND attempts = 0 AND generation IS NULL LIMIT 1" },
        }) do
          local p = plan(env, c[2])
          assert.truthy(p:find("INDEX " .. c[1], 1, true), c[2] .. ": " .. p)
          assert.falsy(p:find("TEMP B-TREE", 1, true), c[2] .. ": " .. p)
        end

        -- a dead row plain SQL makes without died_at gets one (the
        -- triggers jobs_died_at and jobs_died_at_set; see spec
        -- dead_by_hand for the UPDATE's)
        env:exec("INSERT INTO jobs (name, state, finished_at) VALUES ('m44.b', 'dead', 3000000)")
        env:exec("INSERT INTO jobs (name, state, updated_at) VALUES ('m44.b', 'dead', 4000000)")
        env:exec("INSERT INTO jobs (name, updated_at) VALUES ('m44.b', 5000000)")
        env:exec("UPDATE jobs SET state = 'dead', updated_at = 5500000 WHERE id = 13")
        env:exec("INSERT INTO jobs (name, state, died_at) VALUES ('m44.b', 'dead', 6000000)")
        assert.are.same({ { id = 11, d = 3000000 }, { id = 12, d = 4000000 },
                          { id = 13, d = 5500000 }, { id = 14, d = 6000000 } },
          env:query("SELECT id, died_at AS d FROM jobs WHERE name = 'm44.b' ORDER BY id"))
        env:exec("DELETE FROM jobs WHERE name = 'm44.b'")

        -- both dead jobs listed, newest first
        local list = env:cli("dead", "list", "--json")
        local n6, n7 = list:find('"id":6', 1, true), list:find('"id":7', 1, true)
        assert.truthy(n6 and n7, list)
        assert.truthy(n7 < n6, list)

        -- a runner: the old runner's jobs are its own to lose (their
        -- lease runs later); the queued ones run, the one past its expiry
        -- ends expired, and the prunes end what is past retention
        env:config("concurrency = 1, retention = { completed = '1h', cancelled = '1h', dead = '1h' }")
        env:script("m44.a", WORKER)
        env:start()
        jr.wait_for(function() return #jr.lines(env.dir .. "/done") == 2 end,
                    60, "the two queued jobs done")
        jr.wait_for(function()
          return #ids(env, "SELECT id FROM jobs WHERE id IN (6, 8, 9, 10)") == 0
        end, 60, "the ended jobs past retention pruned")
        jr.wait_for(function()
          return #ids(env, "SELECT id FROM jobs WHERE id = 2 AND state = 'expired'") == 1
        end, 60, "job 2 expired")
        assert.equal(0, env:stop())
        local done = jr.lines(env.dir .. "/done")
        table.sort(done)
        assert.are.same({ "1", "3" }, done)
        assert.are.same({ 7 }, ids(env, "SELECT id FROM jobs WHERE state = 'dead'"))
      end)

      it("retries both dead jobs with dead retry --all", function()
        jr.upgrade_intact(env, BEFORE, old_jobs)
        local out, err, code = env:cli("dead", "retry", "--all")
        assert.are.equal(0, code, out .. err)
        assert.are.same({ 6, 7 }, ids(env, "SELECT id FROM jobs WHERE id IN (6, 7)"
          .. " AND state = 'queued' AND died_at IS NULL ORDER BY id"))
        assert.are.same({ 8, 9, 10 }, ids(env, "SELECT id FROM jobs WHERE state <> 'queued'"
          .. " AND state <> 'running' ORDER BY id"))
      end)
    end)
  end
end

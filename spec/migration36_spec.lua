-- migration36_spec.lua - SQLite migration 36 (docs/performance.md, the
-- sequences' drain): jobs_sequence, an entry a job of a sequence, gives
-- way to jobs_seq_head, the jobs of a sequence that wait for none before
-- them and the one pushed into it last (jobs.seq_last). A database of the
-- schema before holding sequences in each shape (a head queued with jobs
-- waiting behind it, a dead job blocking one, a sequence whose jobs
-- ended, a sequence whose head's row is gone) is brought forward by
-- `jobrunner migrate` with every job intact; `jobrunner sequences` lists
-- them as before, a push goes behind each sequence's last job, and a
-- runner then runs each sequence's jobs in push order. SQLite only:
-- PostgreSQL's schema does not change.
local jr = require "jr"
local cjson = require "cjson"

local WORKER = jr.RECORD .. [[
  return function(job) record("done", job.payload.k .. " " .. job.payload.n) end]]

local BEFORE = 35       -- SQLite's schema before this migration

-- Sequence a: 1 queued, 2 and 3 waiting behind it; b: 4 dead blocking
-- it, 5 waiting; c: 6 completed (kept); d: 7 waiting behind a job whose
-- row is gone (purged), 8 behind 7.
local function old_jobs(env)
  local past = jr.past_later(env)
  local rows = {
    { 1, "a", 1, "queued", 0, "block" }, { 2, "a", 2, "waiting", 1, "block" },
    { 3, "a", 3, "waiting", 1, "skip" }, { 4, "b", 1, "dead", 0, "block" },
    { 5, "b", 2, "waiting", 1, "block" }, { 6, "c", 1, "completed", 0, "block" },
    { 7, "d", 2, "waiting", 1, "block" }, { 8, "d", 3, "waiting", 1, "block" },
  }
  local values = {}
  for _, r in ipairs(rows) do
    values[#values + 1] = ("(%d, 'm36.s', '{\"k\": \"%s\", \"n\": %d}', 'default',"
      .. " '%s', %s, %d, %d, '%s', %d, '%s', %s, %s)"):format(r[1], r[2], r[3], r[4],
      past, r[5], r[1] == 4 and 4 or 0, r[2], r[3], r[6],
      r[4] == "dead" and past or "NULL",
      (r[4] == "dead" or r[4] == "completed") and past or "NULL")
  end
  env:exec(([[
    INSERT INTO jobs (id, name, payload, queue, state, run_at, parents_left,
                      attempts, sequence_key, seq_no, seq_fail, died_at,
                      finished_at)
    VALUES %s;
    UPDATE jobs SET flow = 1 WHERE id IN (1, 2, 4, 7);
    UPDATE jobs SET on_parent_failure = 'run' WHERE parents_left = 1;
    INSERT INTO job_deps (parent_id, child_id) VALUES (1, 2), (2, 3), (4, 5),
      (99, 7), (7, 8);
  ]]):format(table.concat(values, ",\n")))
end

local function seq_list(env)
  local out, err, code = env:cli("sequences", "--json")
  assert.equal(0, code, err)
  local by = {}
  for _, s in ipairs(cjson.decode(out)) do
    by[s.key] = { head = s.head, state = s.state, jobs = s.jobs, blocked = s.blocked }
  end
  return by
end

for _, backend in ipairs(jr.backends()) do
  if backend == "sqlite" then
    describe("sqlite: migration 36 (an index entry a sequence)", function()
      local env
      before_each(function() env = jr.env(backend) end)
      after_each(function() env:cleanup() end)

      it("upgrades a schema-" .. BEFORE .. " database with its sequences intact; they run in order", function()
        jr.make_schema(env, BEFORE)
        old_jobs(env)
        local listed = {
          a = { head = 1, state = "queued", jobs = 3, blocked = false },
          b = { head = 4, state = "dead", jobs = 1, blocked = true },
          d = { head = 7, state = "waiting", jobs = 2, blocked = false },
        }
        assert.are.same(listed, seq_list(env))
        local before = jr.job_snapshot(env)
        local out, err, code = env:cli("migrate")
        assert.are.equal(0, code, out .. err)
        assert.are.same(before, jr.job_snapshot(env))
        assert.is_true(env:query("PRAGMA user_version")[1].user_version >= 36)
        assert.are.same({}, env:query("SELECT name FROM sqlite_schema WHERE name = 'jobs_sequence'"))
        -- each sequence's last job marked; the index holds the heads and those
        assert.are.same({ { id = 3 }, { id = 5 }, { id = 6 }, { id = 8 } },
          env:query("SELECT id FROM jobs WHERE seq_last = 1 ORDER BY id"))
        local ids = {}
        for _, r in ipairs(env:query("SELECT id FROM jobs INDEXED BY jobs_seq_head"
          .. " WHERE sequence_key IS NOT NULL AND (parents_left = 0 OR seq_last = 1)"
          .. " ORDER BY id")) do ids[#ids + 1] = r.id end
        assert.are.same({ 1, 3, 4, 5, 6, 8 }, ids)
        assert.are.same({ { r = "ok" } }, env:query("SELECT integrity_check AS r FROM pragma_integrity_check"))
        assert.are.same(listed, seq_list(env))
        -- a push goes behind each sequence's last job, which it becomes
        local a4 = env:push("m36.s", '{"k": "a", "n": 4}', "--sequence", "a")
        local b3 = env:push("m36.s", '{"k": "b", "n": 3}', "--sequence", "b")
        local c2 = env:push("m36.s", '{"k": "c", "n": 2}', "--sequence", "c")
        assert.equal("waiting", env:job(a4).state)
        assert.equal("waiting", env:job(b3).state)
        assert.equal("queued", env:job(c2).state)
        assert.are.same({ { id = 8 }, { id = a4 }, { id = b3 }, { id = c2 } },
          env:query("SELECT id FROM jobs WHERE seq_last = 1 ORDER BY id"))
        assert.are.same({ { parent_id = 3 } },
          env:query("SELECT parent_id FROM job_deps WHERE child_id = " .. a4))
        listed.a.jobs, listed.b.jobs = 4, 2
        listed.c = { head = c2, state = "queued", jobs = 1, blocked = false }
        assert.are.same(listed, seq_list(env))
        env:config("concurrency = 4")
        env:script("m36.s", WORKER)
        env:start()
        jr.wait_for(function() return #jr.lines(env.dir .. "/done") == 5 end,
                    60, "a's four jobs and c's new one done")
        -- b stays blocked until skipped, then its two run in order
        assert.equal(0, select(3, env:cli("sequences", "skip", "b")))
        jr.wait_for(function() return #jr.lines(env.dir .. "/done") == 7 end,
                    60, "b's jobs done")
        assert.equal(0, env:stop())
        local by = {}
        for _, l in ipairs(jr.lines(env.dir .. "/done")) do
          local k, n = l:match("^(%S+) (%d+)$")
          by[k] = by[k] or {}
          by[k][#by[k] + 1] = tonumber(n)
        end
        assert.are.same({ a = { 1, 2, 3, 4 }, b = { 2, 3 }, c = { 2 } }, by)
        assert.are.same({ d = { head = 7, state = "waiting", jobs = 2, blocked = false } },
                        seq_list(env))
      end)
    end)
  end
end

-- limits_walk_spec.lua - a claim under limits per key when the front of a
-- queue is held back (docs/limits.md): 1,200 ready jobs at the queue's
-- front belong to keys at their cap. With every key blocked a claim
-- claims nothing; a key with room behind them has its jobs claimed in
-- order, and a job without a key behind them runs too; a key that frees
-- has its next job claimed first, and no job of a key still blocked runs.
-- Behaviour only: what such a claim reads is bench/limitscan's.
local jr = require "jr"

local WORKER = jr.RECORD .. [[
  return function(job) record("done", job.payload.n) end]]

local N = 1200          -- queued jobs of the blocked keys, ahead of the rest

-- Inserts the rows: a running job of keys a and b each (a dead runner's,
-- its lease far ahead, so they hold their key's slot), N queued jobs of
-- a and b in turn, then c's two jobs and one without a key, all due.
local function rows(env)
  local past = jr.past_later(env)
  local lease = env.backend == "postgres" and "now() + interval '1 day'" or
                "((julianday('now') - 2440587.5) * 86400.0) + 86400"
  env:exec(([[INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
      locked_by, locked_until, limit_key)
    VALUES ('lw.a', '{"n": "ra"}', 'default', 'running', %s, 1, 'old', %s, 'a'),
           ('lw.a', '{"n": "rb"}', 'default', 'running', %s, 1, 'old', %s, 'b')]]
    ):format(past, lease, past, lease))
  -- N queued jobs, a1 b2 a3 b4 ..., then c1, c2
  local series = env.backend == "postgres" and "generate_series(1, %d) AS s(i)" or
    "(WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < %d) SELECT i FROM s) AS s"
  local k = "CASE WHEN i % 2 = 1 THEN 'a' ELSE 'b' END"
  env:exec(([[INSERT INTO jobs (name, payload, queue, state, run_at, attempts, limit_key)
    SELECT 'lw.a', %s, 'default', 'queued', %s, 0, %s FROM %s ORDER BY i]]):format(
    (env.backend == "postgres" and "jsonb_build_object('n', %s || i)" or
     "json_object('n', %s || i)"):format(k), past, k, series:format(N)))
  env:exec(([[INSERT INTO jobs (name, payload, queue, state, run_at, attempts, limit_key)
    VALUES ('lw.a', '{"n": "c1"}', 'default', 'queued', %s, 0, 'c'),
           ('lw.a', '{"n": "c2"}', 'default', 'queued', %s, 0, 'c'),
           ('lw.a', '{"n": "u1"}', 'default', 'queued', %s, 0, NULL)]]):format(
    past, past, past))
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": a claim under limits per key, the queue's front held back", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("claims the open key's jobs in order and the unkeyed one, none of the blocked keys', then a freed key's first", function()
      env:config([[concurrency = 2, poll_interval = 0.2,
        limits = { ["lw.a"] = { per_key = { concurrency = 1 } } }]])
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      rows(env)
      env:script("lw.a", WORKER)
      env:start()
      -- c's two jobs, one at a time (its cap), and u1, behind 1,200
      -- blocked ones
      jr.wait_for(function() return #jr.lines(env.dir .. "/done") == 3 end,
                  30, "c's jobs and u1 done")
      jr.sleep(1)
      local first = jr.lines(env.dir .. "/done")
      assert.equal(3, #first)
      local c = {}
      for _, n in ipairs(first) do
        if n:sub(1, 1) == "c" then c[#c + 1] = n end
      end
      assert.are.same({ "c1", "c2" }, c)
      table.sort(first)
      assert.are.same({ "c1", "c2", "u1" }, first)
      -- every key blocked: nothing more runs
      assert.equal(N, env:count("queued"))
      assert.equal(2, env:count("running"))
      -- a's running job ends: a's next job in order runs, and a's after
      -- it, b's none
      env:exec("UPDATE jobs SET state = 'completed', locked_by = NULL,"
        .. " locked_until = NULL WHERE limit_key = 'a' AND state = 'running'")
      jr.wait_for(function() return #jr.lines(env.dir .. "/done") >= 5 end,
                  30, "a's next jobs done")
      assert.equal(0, env:stop())
      local done = jr.lines(env.dir .. "/done")
      assert.are.same({ "a1", "a3" }, { done[4], done[5] })
      for i = 4, #done do
        assert.matches("^a%d+$", done[i])
      end
      assert.equal(1, env:count("running"))     -- b's, never freed
    end)
  end)
end

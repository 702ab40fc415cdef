-- migration_seqwait_spec.lua - a fair queue's job waiting behind its
-- sequence takes no turn of its key (docs/queues.md, "Fair share",
-- "Sequences"): migration 42 on PostgreSQL (sequence_put gives the
-- waiting job's turn back; fair_seq_give and fair_seq_tag for a batch),
-- and on both engines the tags that waiting jobs held dropped. A
-- database of the schema before (40 on both) holding a fair queue's
-- sequence, its head queued and tagged and its second job waiting with
-- the tag its push gave, beside a plain job of the key, is brought
-- forward by `jobrunner migrate` with every job and edge intact, the
-- waiting job's tag dropped; a push into the sequence then waits without
-- a tag, a plain push of the key takes the turn after the key's last,
-- and a runner runs everything, the sequence in order.
local jr = require "jr"
local fr = require "fairrows"

local WORKER = jr.RECORD .. [[
  return function(job) record("done", tostring(job.payload.n)) end]]

local BEFORE = 40       -- the schema before this migration, on both

local function old_jobs(env)
  local pg = env.backend == "postgres"
  local past = jr.past_later(env)
  env:exec(([[
    INSERT INTO fair_paths (queue, path, wdefault) VALUES ('fq', '%s', 1);
    INSERT INTO fair_keys (queue, key, pass, base, n, tw)
    VALUES ('fq', 'a', 3, 0, 3, 1);
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                      sequence_key, seq_no, seq_fail, parents_left, flow,
                      fair_key, fair_tag, fair_w)
    VALUES ('msw.s', '{"t": "a", "n": 1}', 'fq', 'queued', %s, 0, 'q', 1, 'block', 0, 1, 'a', 0, 1),
           ('msw.s', '{"t": "a", "n": 2}', 'fq', 'waiting', %s, 0, 'q', 2, 'block', 1, 0, 'a', 1, 1),
           ('msw.s', '{"t": "a", "n": 3}', 'fq', 'queued', %s, 0, NULL, NULL, NULL, 0, 0, 'a', 2, 1);
    INSERT INTO job_deps (parent_id, child_id) VALUES (1, 2);
  ]]):format(pg and "{t}" or "$.t", past, past, past))
  if not pg then env:exec("UPDATE jobs SET seq_last = 1 WHERE id = 2") end
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": migration 42 (a job waiting in its sequence takes no turn)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-" .. BEFORE .. " database with its jobs intact", function()
      assert.are.same(jr.upgrade_intact(env, BEFORE, old_jobs, [[concurrency = 1,
        limits = { ["queue:fq"] = { fair = { key = "payload.t" } } }]]))
      assert.are.same({ { parent_id = 1, child_id = 2 } },
        env:query("SELECT parent_id, child_id FROM job_deps ORDER BY parent_id"))
      -- the waiting job's tag dropped; its turn stays spent (job 3's after)
      assert.are.same({ { "queued", 0 }, { "waiting", "-" }, { "queued", 2 } },
                      fr.rows(env, ""))
      local q = jr.client(env)
      assert(q:push("msw.s", { t = "a", n = 4 }, { queue = "fq", sequence = "q" }))
      assert(q:push("msw.s", { t = "a", n = 5 }, { queue = "fq" }))
      q:close()
      local r = fr.rows(env, "")
      assert.are.same({ "waiting", "-" }, r[4])
      assert.are.same({ "queued", 3 }, r[5])   -- next to job 3's, not behind 4's
      env:script("msw.s", WORKER)
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/done") == 5 end,
                  60, "every job done")
      assert.equal(0, env:stop())
      local done, at = jr.lines(env.dir .. "/done"), {}
      for i, n in ipairs(done) do at[n] = i end
      local all = table.concat(done, " ")
      assert.is_true(at["1"] < at["2"] and at["2"] < at["4"], all)
      assert.equal(0, env:count())
    end)
  end)
end

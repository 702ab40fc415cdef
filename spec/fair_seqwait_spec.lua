-- fair_seqwait_spec.lua - a fair queue's job pushed behind another of its
-- sequence (docs/queues.md, "Fair share", "Sequences") waits until the
-- one before it ends, and a job not ready takes no turn of its key: it
-- holds no tag while it waits (its push's turn given back), so a job of
-- its key pushed after it is tagged as if the waiting jobs were not
-- there; once queued it is tagged by the next claim. A single push and a
-- batch (push_many of a name whose handler's sequence option puts its
-- jobs into sequences, recorded in sequence_paths) alike. A run drains everything, each sequence in
-- push order. Both engines; asserts stored rows and the order of runs.
local jr = require "jr"
local fr = require "fairrows"
local rows, key_n, index_of = fr.rows, fr.key_n, fr.index_of

local WORKER = jr.RECORD .. [[
  return function(job) record("done", job.payload.n) end]]

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " fair queue, a job waiting behind its sequence:", function()
    local env
    before_each(function()
      env = jr.env(backend)
      env:config([[concurrency = 1,
        limits = { ["queue:fq"] = { fair = { key = "payload.t" } } }]])
      local out, err, code = env:cli("migrate")
      assert.equal(0, code, out .. err)
      env:exec("INSERT INTO sequence_paths (name, path) VALUES ('sw.s', 's')")
    end)
    after_each(function() env:cleanup() end)

    -- a batch's job of sequence seq (the name sw.s puts it there), or a
    -- plain one
    local function job(t, n, seq)
      return { seq and "sw.s" or "sw.w", { t = t, n = n, s = seq },
               { queue = "fq" } }
    end

    local function push(q, t, n, o)
      o.queue = "fq"
      return assert(q:push("sw.w", { t = t, n = n }, o))
    end

    local function batch(q, jobs) assert(q:push_many(jobs)) end

    it("takes no turn of its key: a job of the key pushed after is next", function()
      local q = jr.client(env)
      push(q, "a", 1, { sequence = "s" })
      push(q, "a", 2, { sequence = "s" })
      push(q, "a", 3, { sequence = "s" })
      push(q, "a", 4, {})
      push(q, "b", 5, {})
      q:close()
      assert.are.same({ { "queued", 0 }, { "waiting", "-" }, { "waiting", "-" },
                        { "queued", 1 }, { "queued", 0 } }, rows(env))
      assert.equal(2, key_n(env, "a"))    -- jobs 1 and 4 took a's turns
    end)

    it("pushed in a batch takes no turn either", function()
      local q = jr.client(env)
      batch(q, { job("a", 1, "s"),
                 job("a", 2, "s"),
                 job("b", 3),
                 job("a", 4, "s") })
      push(q, "a", 5, {})
      q:close()
      assert.are.same({ { "queued", 0 }, { "waiting", "-" }, { "queued", 0 },
                        { "waiting", "-" }, { "queued", 1 } }, rows(env))
      assert.equal(2, key_n(env, "a"))
    end)

    it("pushed in a batch behind a job of an earlier push takes no turn", function()
      local q = jr.client(env)
      push(q, "a", 1, { sequence = "s" })
      batch(q, { job("a", 2, "s"),
                 job("a", 3, "s"),
                 job("a", 4, "s2") })
      push(q, "a", 5, {})
      q:close()
      assert.are.same({ { "queued", 0 }, { "waiting", "-" }, { "waiting", "-" },
                        { "queued", 1 }, { "queued", 2 } }, rows(env))
      assert.equal(3, key_n(env, "a"))
    end)

    it("pushed in a batch before a plain job of its key is not ahead of it", function()
      local q = jr.client(env)
      batch(q, { job("a", 1, "s"),
                 job("a", 2, "s"),
                 job("a", 3) })
      q:close()
      -- job 3 takes the turn after job 1's, not one after job 2's
      assert.are.same({ { "queued", 0 }, { "waiting", "-" }, { "queued", 1 } },
                      rows(env))
      assert.equal(2, key_n(env, "a"))
    end)

    it("is tagged once queued, and a run drains each sequence in order", function()
      local q = jr.client(env)
      push(q, "a", 1, { sequence = "s" })
      push(q, "a", 2, { sequence = "s" })
      batch(q, { job("a", 3, "s"),
                 job("b", 4, "t"),
                 job("b", 5, "t"),
                 job("a", 6),
                 job("b", 7) })
      q:close()
      local r = rows(env)
      assert.are.same({ "waiting", "-" }, r[2])
      assert.are.same({ "waiting", "-" }, r[3])
      assert.are.same({ "waiting", "-" }, r[5])
      assert.are.same({ "queued", 1 }, r[6])    -- not behind 2 and 3
      assert.are.same({ "queued", 1 }, r[7])
      env:script("sw.w", WORKER)
      env:script("sw.s", WORKER)
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/done") == 7 end,
                  60, "every job done")
      assert.equal(0, env:stop())
      local done = jr.lines(env.dir .. "/done")
      local all = table.concat(done, " ")
      for _, s in ipairs({ { "1", "2", "3" }, { "4", "5" } }) do
        for i = 2, #s do
          assert.is_true(index_of(done, s[i - 1]) < index_of(done, s[i]), all)
        end
      end
      -- a's plain job ran before the last of a's sequence: its turn was
      -- not behind turns of jobs that could not run
      assert.is_true(index_of(done, "6") < index_of(done, "3"), all)
      assert.equal(0, env:count())
    end)
  end)
end

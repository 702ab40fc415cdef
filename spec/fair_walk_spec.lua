-- fair_walk_spec.lua - fair share inside a queue, the claim's walk of
-- the keys with queued jobs and the runner's local queue (docs/queues.md,
-- "Fair share"), on each backend: a key's job pushed while the runner
-- holds another key's short jobs claimed ahead starts next, not after
-- them; a key whose only job is due later holds back no other key, a
-- key that emptied starts again at its next job's claim, and one whose
-- backlog ran out alone comes back level with a new key; each start of
-- a key counts in its pass, several in a claim; on PostgreSQL, a key's
-- jobs are read through jobs_fair before the table has statistics, and
-- two runners share the turns and start each job once. Starts are
-- counted in the order the handler records them, no timings.
local jr = require "jr"

local WORKER = jr.RECORD .. [[
  local now = require("jobrunner").now
  return function(job)
    record("starts", job.payload.t .. " " .. job.payload.n)
    if job.payload.slow then           -- 10 ms: not claimed ahead
      local t = now() + 0.01
      require("jobrunner").sleep(math.max(0, t - now()))
    end
  end]]

-- The same, each job 3 ms long (short: claimed ahead, master/claimq.c),
-- each start with its time.
local TIMED = jr.RECORD .. [[
  local now = require("jobrunner").now
  return function(job)
    local t = now()
    require("jobrunner").sleep(math.max(0, t + 0.003 - now()))
    record("starts", job.payload.t .. " " .. job.payload.n .. " " .. string.format("%.6f", t))
  end]]

local function push(env, t, n, opts, slow)
  local q = jr.client(env)
  local jobs = {}
  for i = 1, n do
    local o = { queue = "fq" }
    for k, v in pairs(opts or {}) do o[k] = v end
    jobs[i] = { "fair.w", { t = t, n = i, slow = slow }, o }
  end
  assert(q:push_many(jobs))
  q:close()
end

local function starts(env)
  local t = {}
  for _, l in ipairs(jr.lines(env.dir .. "/starts")) do t[#t + 1] = l:match("^(%S+)") end
  return t
end

local function config(env, extra)
  env:config([[concurrency = 1,
    limits = { ["queue:fq"] = { fair = { key = "payload.t" } } }]] .. (extra or ""))
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " fair claims:", function()
    local env = jr.test_env(backend)

    it("starts a key's job pushed while another's short jobs wait claimed ahead next", function()
      config(env, [[, retention = { completed = "1h" }]])
      env:script("fair.w", TIMED)
      push(env, "a", 1200)
      env:start()
      -- short jobs: the runner claims hundreds of a's ahead
      jr.wait_for(function() return #starts(env) >= 150 end, 60, "a's jobs started")
      push(env, "b", 1)
      local b = env:query(backend == "postgres" and
        "SELECT extract(epoch FROM created_at) AS created_at FROM jobs WHERE payload->>'t' = 'b'" or
        "SELECT created_at FROM jobs WHERE json_extract(payload, '$.t') = 'b'")[1]
      jr.wait_for(function()
        for _, t in ipairs(starts(env)) do if t == "b" then return true end end
      end, 60, "b's job started")
      -- the a's started between b's push and b's start: those already
      -- handed to the worker and those started while the claim that took
      -- b ran, not the a's claimed ahead (half a local queue: 256 and more)
      local pushed, between = tonumber(b.created_at), 0
      for _, l in ipairs(jr.lines(env.dir .. "/starts")) do
        local t, at = l:match("^(%S+) %S+ (%S+)")
        if t == "b" then break end
        if tonumber(at) >= pushed then between = between + 1 end
      end
      assert.is_true(between <= 100, ("b started after %d of a's started since its push"):format(between))
      env:stop()
    end)

    it("holds back no key for one whose job is due later, and starts a key that emptied again", function()
      config(env)
      env:script("fair.w", WORKER)
      push(env, "later", 1, { run_in = 3600 })
      push(env, "a", 20)
      push(env, "b", 20)
      env:start()
      jr.wait_for(function() return #starts(env) == 40 end, 60, "a's and b's jobs started")
      -- a and b took turns; the later key's job waits for its time
      local first = starts(env)
      local a = 0
      for i = 1, 20 do a = a + (first[i] == "a" and 1 or 0) end
      assert.is_true(a >= 9 and a <= 11, "a had " .. a .. " of the first 20")
      assert.are.equal(1, #env:query("SELECT id FROM jobs WHERE state = 'queued'"))
      -- a emptied; its next job starts at the next claim
      push(env, "a", 1)
      jr.wait_for(function() return #starts(env) == 41 end, 60, "a's new job started")
      assert.are.equal("a", starts(env)[41])
      env:stop()
    end)

    it("brings a key whose backlog ran out alone back level with a new one", function()
      config(env)
      env:script("fair.w", WORKER)
      -- a alone: short jobs, all claimed at once (fewer than a claim
      -- takes ahead), all its turns
      push(env, "a", 300)
      env:start()
      jr.wait_for(function() return #starts(env) == 300 end, 60, "a's backlog started")
      jr.wait_for(function() return env:count() == 0 end, 60, "a's backlog done")
      env:stop()
      -- a and a new key b, together, 10 ms jobs (claimed one or two at
      -- a time: the claims decide the turns): they take turns from the
      -- start
      push(env, "a", 20, nil, true)
      push(env, "b", 20, nil, true)
      env:start()
      jr.wait_for(function() return #starts(env) == 340 end, 60, "both started")
      local all, b = starts(env), 0
      for i = 301, 320 do b = b + (all[i] == "b" and 1 or 0) end
      assert.is_true(b >= 9 and b <= 11, "b had " .. b .. " of the first 20: " ..
                     table.concat(all, " ", 301, 340))
      env:stop()
    end)

    it("counts each start of a key in its pass, several in one claim", function()
      -- short jobs, claimed ahead: a claim starts several of a key's
      -- jobs, and writes their passes at once (a key with a quote and a
      -- non-ASCII letter in it too)
      env:config([[concurrency = 1, limits = { ["queue:fq"] = { fair = {
        key = "payload.t", weights = { a = 2 } } } }]])
      env:script("fair.w", WORKER)
      push(env, "a", 6)
      push(env, "b", 3)
      push(env, 'q"\u{e9}', 1)
      env:start()
      jr.wait_for(function() return #starts(env) == 10 end, 60, "all started")
      jr.wait_for(function() return env:count() == 0 end, 60, "all done")
      env:stop()
      -- each start added 1/weight from 0: a 6 x 1/2, b 3 x 1, the third 1
      local pass = {}
      for _, r in ipairs(env:query("SELECT key, pass FROM fair_keys WHERE queue = 'fq'")) do
        pass[r.key] = tonumber(r.pass)
      end
      assert.is_true(math.abs(pass.a - 3) < 1e-9, "a: " .. tostring(pass.a))
      assert.is_true(math.abs(pass.b - 3) < 1e-9, "b: " .. tostring(pass.b))
      assert.is_true(math.abs(pass['q"\u{e9}'] - 1) < 1e-9, "q: " .. tostring(pass['q"\u{e9}']))
    end)

    if backend == "postgres" then
      it("reads a key's jobs through jobs_fair before the table's first ANALYZE", function()
        config(env)
        env:script("fair.w", "return function() end")
        env:start()
        jr.wait_for(function()
          return #env:query("SELECT queue FROM fair_paths WHERE queue = 'fq'") == 1
        end, 60, "the fair path recorded")
        -- no statistics: the planner has only the index definitions
        env:exec("ALTER TABLE jobs SET (autovacuum_enabled = false)")
        local q = jr.client(env)
        local jobs = {}
        for i = 1, 2000 do jobs[i] = { "fair.w", { t = "k" .. (i % 1000) }, { queue = "fq" } } end
        assert(q:push_many(jobs))
        q:close()
        jr.wait_for(function() return env:count() == 0 end, 120, "all done")
        env:stop()
        -- a key's jobs read in claim order (jobs_claim) filtered by key
        -- cost a scan of the queue up to the key's first: half a million
        -- index entries for these 1000 keys
        local r = env:query(("SELECT idx_tup_read FROM pg_stat_user_indexes" ..
          " WHERE schemaname = '%s' AND indexrelname = 'jobs_claim'"):format(env.schema))[1]
        assert.is_true(tonumber(r.idx_tup_read) < 40000,
                       "jobs_claim entries read: " .. r.idx_tup_read)
      end)

      it("shares the turns between two runners, each job started once", function()
        config(env, [[, retention = { completed = "1h" }]])
        env:script("fair.w", WORKER)
        push(env, "a", 300)
        push(env, "b", 20)
        env:start()
        env:start()
        jr.wait_for(function() return #starts(env) == 320 end, 60, "all started")
        local all = starts(env)
        local b = 0
        for i = 1, 80 do b = b + (all[i] == "b" and 1 or 0) end
        -- in push order b's 20 would be the last; by turns they come
        -- among the first 40 or so, whichever runner claims them
        assert.is_true(b >= 18, "b had " .. b .. " of the first 80: " .. table.concat(all, " ", 1, 80))
        local seen = {}
        for _, l in ipairs(jr.lines(env.dir .. "/starts")) do
          assert.is_nil(seen[l], "started twice: " .. l)
          seen[l] = true
        end
        env:stop(nil, env.procs[1])
        env:stop(nil, env.procs[2])
      end)
    end
  end)
end

-- aging_spec.lua - priority aging (docs/queues.md, "Priority aging"), on
-- each backend: a ready job of a queue with priority_aging rises a level
-- per period waited, so an old low-priority job starts before fresh
-- high-priority ones and a stream of high-priority jobs cannot starve a
-- low one; show prints the effective priority; bad settings named. One
-- worker: the handler records the starts in order, no timings.
local jr = require "jr"

-- Records each job's tag in file "starts". A "high" job spins 20 ms and
-- pushes the next high one until file "low" exists (or 1500 of them).
local WORKER = jr.RECORD .. [[
  local jobrunner = require "jobrunner"
  return function(job)
    local dir = os.getenv("PWD")
    record("starts", job.payload.tag)
    if job.payload.tag == "low" then
      record("low", "started")
    elseif job.payload.tag == "high" then
      local t = jobrunner.now() + 0.02
      jobrunner.sleep(math.max(0, t - jobrunner.now()))
      local f = io.open(dir .. "/low")
      if f then f:close() return end
      if job.payload.n < 1500 then
        jobrunner.push("age.w", { tag = "high", n = job.payload.n + 1 },
                       { queue = "aq", priority = 0 })
      end
    end
  end]]

local function aging_config(env, period)
  env:config(([[concurrency = 1,
    limits = { ["queue:aq"] = { priority_aging = %q } }]]):format(period))
end

local function index_of(list, x)
  for i, v in ipairs(list) do if v == x then return i end end
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " priority aging:", function()
    local env = jr.test_env(backend)

    it("starts a job that waited before fresher jobs of a better priority, and show says its effective priority", function()
      aging_config(env, "60s")
      env:script("age.w", WORKER)
      local q = jr.client(env)
      local now = os.time()
      local jobs = {}
      for i = 1, 20 do jobs[i] = { "age.w", { tag = "p0" }, { queue = "aq", priority = 0 } } end
      assert(q:push_many(jobs))
      -- an hour old at priority 10: 60 levels, effective -50
      local old = assert(q:push("age.w", { tag = "old" },
                                { queue = "aq", priority = 10, run_at = now - 3600 }))
      -- two minutes old at priority 5: effective 3, after the p0 jobs
      assert(q:push("age.w", { tag = "mid" }, { queue = "aq", priority = 5, run_at = now - 120 }))
      assert(q:push("age.w", { tag = "new" }, { queue = "aq", priority = 4 }))
      q:close()
      local out, err, code = env:cli("show", tostring(old))
      assert.equal(0, code, err)
      assert.matches("priority%s+10 %(effective %-50: its queue ages a level every 60s waited%)", out)
      out, err, code = env:cli("show", tostring(old), "--json")
      assert.equal(0, code, err)
      assert.matches('"priority":10,"effective_priority":-50', out, 1, true)
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/starts") == 23 end, 60, "drained")
      local starts = jr.lines(env.dir .. "/starts")
      -- without aging: the p0 jobs, then new (4), mid (5), old (10)
      assert.equal("old", starts[1], table.concat(starts, " "))
      assert.equal(22, index_of(starts, "mid"), table.concat(starts, " "))
      assert.equal(23, index_of(starts, "new"), table.concat(starts, " "))
    end)

    it("does not let a stream of high-priority jobs starve a low-priority one", function()
      aging_config(env, "300ms")
      env:script("age.w", WORKER)
      local q = jr.client(env)
      assert(q:push_many({
        { "age.w", { tag = "high", n = 1 }, { queue = "aq", priority = 0 } },
        { "age.w", { tag = "high", n = 1 }, { queue = "aq", priority = 0 } },
        { "age.w", { tag = "high", n = 1 }, { queue = "aq", priority = 0 } },
      }))
      -- 5 levels below: ready behind the stream until it has waited 1.5 s
      assert(q:push("age.w", { tag = "low" }, { queue = "aq", priority = 5 }))
      q:close()
      env:start()
      jr.wait_file(env.dir .. "/low", 60, "the low-priority job started")
      jr.wait_for(function() return env:count() == 0 end, 60, "drained")
      local starts = jr.lines(env.dir .. "/starts")
      local at = index_of(starts, "low")
      -- the stream was still going when it started: it pushed more than
      -- the three jobs it began with, and had not run out
      assert.is_true(at > 4 and at < 1500, "low started at " .. at)
      assert.is_true(#starts > at, "no high job after the low one")
    end)

    it("refuses priority_aging on a job name, on a fair queue, or not a duration", function()
      env:script("age.w", WORKER)
      env:config([[limits = { ["age.w"] = { priority_aging = "30s" } }]])
      local _, err, code = env:cli("check")
      assert.is_not.equal(0, code)
      assert.matches("limits.age.w.priority_aging' is for limits on a queue", err, 1, true)
      env:config([[limits = { ["queue:aq"] = { priority_aging = "30s",
        fair = { key = "payload.t" } } }]])
      _, err, code = env:cli("check")
      assert.is_not.equal(0, code)
      assert.matches("limits.queue:aq.priority_aging' cannot be on a fair queue", err, 1, true)
      env:config([[limits = { ["queue:aq"] = { priority_aging = "soon" } }]])
      _, err, code = env:cli("check")
      assert.is_not.equal(0, code)
      assert.matches("limits.queue:aq.priority_aging' must be seconds or a duration", err, 1, true)
    end)
  end)
end

-- fair_spec.lua - fair share inside a queue (docs/queues.md, "Fair
-- share"), on each backend: a queue's ready jobs start round robin
-- between the keys of their payload by weight, not in push order; the
-- weights of the config and of `jobrunner fair set`; a fair queue beside
-- a plain one; bad settings named. Starts are counted in the order the
-- handler records them (one worker: one start at a time), no timings.
local jr = require "jr"

-- Records each job's tenant and number in file "starts".
local WORKER = jr.RECORD .. [[
  return function(job)
    record("starts", job.payload.t .. " " .. job.payload.n .. " " .. job.queue)
  end]]

-- The same, and the 20th start waits for file "gate" (one worker: no
-- job starts meanwhile). Each takes 10 ms: jobs that short are not
-- claimed ahead (master/claimq.c claims ahead jobs under 5 ms), so the
-- jobs after the gate are claimed after it.
local GATED = jr.RECORD .. [[
  local function lines(path)
    local n, f = 0, io.open(path)
    if not f then return 0 end
    for _ in f:lines() do n = n + 1 end
    f:close()
    return n
  end
  local now = require("jobrunner").now
  return function(job)
    local dir = os.getenv("PWD")
    local t = now() + 0.01
    require("jobrunner").sleep(math.max(0, t - now()))
    record("starts", job.payload.t .. " " .. job.payload.n .. " " .. job.queue)
    if lines(dir .. "/starts") == 20 then
      for _ = 1, 1200 do
        local g = io.open(dir .. "/gate")
        if g then g:close() return end
        os.execute("sleep 0.05")
      end
    end
  end]]

local function fair_config(env, weights, extra)
  env:config(([[concurrency = 1,
    limits = { ["queue:fq"] = { fair = { key = "payload.t"%s } } }%s]]):format(
      weights and (", weights = " .. weights) or "", extra or ""))
end

-- Pushes n jobs of tenant t into queue (default fq) through the client.
local function push(env, t, n, queue)
  local q = jr.client(env)
  local jobs = {}
  for i = 1, n do jobs[i] = { "fair.w", { t = t, n = i }, { queue = queue or "fq" } } end
  assert(q:push_many(jobs))
  q:close()
end

-- The tenants of the first k starts (all when k is nil).
local function starts(env, k)
  local t = {}
  for _, l in ipairs(jr.lines(env.dir .. "/starts")) do
    if k == nil or #t < k then t[#t + 1] = l:match("^(%S+)") end
  end
  return t
end

local function count(list, who)
  local n = 0
  for _, x in ipairs(list) do n = n + (x == who and 1 or 0) end
  return n
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " fair share:", function()
    local env = jr.test_env(backend)

    it("starts a tenant pushed after another's backlog interleaved, not behind it", function()
      fair_config(env)
      env:script("fair.w", WORKER)
      push(env, "a", 200)
      push(env, "b", 20)
      env:start()
      jr.wait_for(function() return env:count() == 0 end, 60, "drained")
      local all = starts(env)
      assert.equal(220, #all)
      -- equal weights: a and b take turns while both have jobs, so b's 20
      -- are among the first 40 or so starts (in push order they would be
      -- the last 20)
      local first = starts(env, 44)
      assert.is_true(count(first, "b") >= 19, "b started " .. count(first, "b")
                     .. " of the first 44: " .. table.concat(first, " "))
      -- within a tenant, push order
      local n = {}
      for _, l in ipairs(jr.lines(env.dir .. "/starts")) do
        local t, i = l:match("^(%S+) (%d+)")
        assert.is_true(tonumber(i) > (n[t] or 0), "tenant " .. t .. " out of order")
        n[t] = tonumber(i)
      end
    end)

    it("gives a key of weight 4 four starts for each of a key of weight 1", function()
      fair_config(env, "{ acme = 4 }")
      env:script("fair.w", WORKER)
      push(env, "other", 150)
      push(env, "acme", 150)
      env:start()
      jr.wait_for(function() return env:count() == 0 end, 60, "drained")
      local first = starts(env, 150)
      local acme = count(first, "acme")
      -- 4:1 over the backlog: 120 of 150, within 5%
      assert.is_true(acme >= 114 and acme <= 126, "acme had " .. acme .. " of 150")
    end)

    it("takes weights set with fair set over the config's, for every claim", function()
      fair_config(env, "{ acme = 4 }")
      env:script("fair.w", GATED)
      push(env, "acme", 150)
      push(env, "other", 150)
      local out, err, code = env:cli("fair", "set", "fq", "acme", "1")
      assert.equal(0, code, err)
      assert.matches("acme", out)
      out, err, code = env:cli("fair", "set", "fq", "other", "4")
      assert.equal(0, code, err)
      env:start()
      -- a change while the runner runs: the 20th job holds the only
      -- worker until the change is made, so the starts after it are the
      -- ones claims made with the change
      jr.wait_for(function() return #starts(env) >= 20 end, 60, "started")
      local first = starts(env, 20)
      assert.is_true(count(first, "other") >= 14, "other had " .. count(first, "other")
                     .. " of the first 20: " .. table.concat(first, " "))
      out, err, code = env:cli("fair", "set", "fq", "acme", "4")
      assert.equal(0, code, err)
      out, err, code = env:cli("fair", "set", "fq", "other", "1")
      assert.equal(0, code, err)
      jr.write_file(env.dir .. "/gate", "")
      jr.wait_for(function() return #starts(env) == 300 end, 60, "drained")
      local all, late = starts(env), {}
      assert.equal(300, #all)
      -- a paused fair queue starts nothing
      assert.equal(0, select(3, env:cli("queue", "pause", "fq")))
      push(env, "acme", 3)
      jr.sleep(1)
      assert.equal(300, #starts(env))
      assert.equal(0, select(3, env:cli("queue", "resume", "fq")))
      jr.wait_for(function() return #starts(env) == 303 end, 60, "resumed")
      for i = 21, 70 do late[#late + 1] = all[i] end
      assert.is_true(count(late, "acme") >= 36, "acme had " .. count(late, "acme")
                     .. " of the 50 starts after the change: " .. table.concat(late, " "))
    end)

    it("runs a fair queue beside a plain one, the plain one in push order", function()
      fair_config(env, nil, [[,
    queues = { fq = 1, plain = 1 }]])
      env:script("fair.w", WORKER)
      push(env, "a", 30)
      push(env, "b", 10)
      push(env, "p", 30, "plain")
      env:start()
      jr.wait_for(function() return env:count() == 0 end, 60, "drained")
      local lines = jr.lines(env.dir .. "/starts")
      assert.equal(70, #lines)
      local last = 0
      for _, l in ipairs(lines) do
        local t, i, queue = l:match("^(%S+) (%d+) (%S+)$")
        if queue == "plain" then
          assert.equal(last + 1, tonumber(i))
          last = tonumber(i)
        end
      end
      assert.equal(30, last)
    end)

    -- a fair queue alone is claimed by one statement (postgres/fairclaim.c's
    -- st_fair_claim) only while no other queue has a queued job
    it("takes turns between a fair queue and another, neither capped", function()
      fair_config(env)
      env:script("fair.w", WORKER)
      push(env, "a", 40)
      push(env, "b", 40)
      push(env, "p", 40, "plain")
      env:start()
      jr.wait_for(function() return env:count() == 0 end, 60, "drained")
      local first = starts(env, 60)
      assert.equal(120, #jr.lines(env.dir .. "/starts"))
      -- in turns: a third of the first 60 are the plain queue's (all
      -- after the fair queue's 80 when that queue was claimed alone)
      assert.is_true(count(first, "p") >= 15, table.concat(first, " "))
      assert.is_true(count(first, "a") >= 10, table.concat(first, " "))
      assert.is_true(count(first, "b") >= 10, table.concat(first, " "))
    end)

    it("refuses bad fair settings naming the key, and a bad fair set", function()
      env:script("fair.w", WORKER)
      env:config([[limits = { ["fair.w"] = { fair = { key = "payload.t" } } }]])
      local _, err, code = env:cli("check")
      assert.is_not.equal(0, code)
      assert.matches("limits.fair.w.fair' is for limits on a queue", err, 1, true)
      env:config([[limits = { ["queue:fq"] = { fair = { weights = { a = 2 } } } }]])
      _, err, code = env:cli("check")
      assert.is_not.equal(0, code)
      assert.matches("limits.queue:fq.fair.key' is missing", err, 1, true)
      env:config([[limits = { ["queue:fq"] = { fair = { key = "payload.t", weights = { a = 0 } } } }]])
      _, err, code = env:cli("check")
      assert.is_not.equal(0, code)
      assert.matches("limits.queue:fq.fair.weights.a' must be a number from 1 to 1000", err, 1, true)
      fair_config(env)
      _, err, code = env:cli("fair", "set", "fq", "a", "0")
      assert.equal(2, code)
      assert.matches("WEIGHT must be a number from 1 to 1000", err, 1, true)
    end)
  end)
end

-- cost_spec.lua - limits by cost (docs/limits.md, "Limits by cost"), on
-- each backend: a job's cost takes that many tokens of a rate's bucket
-- and slots of a concurrency cap, a job without one takes 1; a cost over
-- a limit's bucket is refused at push naming the limit and the cost. The
-- rate's refill (1000 an hour) is too slow to matter while a spec runs:
-- what started is what the bucket held, no timings.
local jr = require "jr"
local cjson = require "cjson"

-- Records "start TAG" in file "starts"; a job with gate = true holds its
-- worker until file "gate" exists. Each takes 10 ms: jobs that short are
-- not claimed ahead (master/claimq.c claims ahead jobs under 5 ms), so
-- one worker's claims take one job each.
local WORKER = jr.RECORD .. [[
  local now = require("jobrunner").now
  return function(job)
    local dir = os.getenv("PWD")
    local t = now() + 0.01
    require("jobrunner").sleep(math.max(0, t - now()))
    record("starts", job.payload.tag)
    if job.payload.gate then
      for _ = 1, 2400 do
        local g = io.open(dir .. "/gate")
        if g then g:close() return end
        os.execute("sleep 0.05")
      end
    end
  end]]

local function count(list, tag)
  local n = 0
  for _, x in ipairs(list) do n = n + (x == tag and 1 or 0) end
  return n
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " limits by cost:", function()
    local env = jr.test_env(backend)

    it("takes a job's cost from a rate's bucket, 1 for a job without one, the cheap ones past the dear", function()
      env:config([[concurrency = 1,
        limits = { ["cost.w"] = { rate = "1000/1h" } }]])
      env:script("cost.w", WORKER)
      local q = jr.client(env)
      local jobs = {}
      for i = 1, 5 do jobs[i] = { "cost.w", { tag = "big" }, { cost = 300 } } end
      for i = 6, 8 do jobs[i] = { "cost.w", { tag = "small" } } end
      assert(q:push_many(jobs))
      q:close()
      env:start()
      -- 1000 tokens: three of 300, then the three of 1 (100 left), which
      -- claims of one job find behind the two of 300 that cannot start
      jr.wait_for(function() return #jr.lines(env.dir .. "/starts") >= 6 end, 60, "6 started")
      jr.wait_for(function() return env:count("queued") == 2 end, 30, "2 left queued")
      local starts = jr.lines(env.dir .. "/starts")
      assert.equal(3, count(starts, "big"), table.concat(starts, " "))
      assert.equal(3, count(starts, "small"), table.concat(starts, " "))
      local out, err, code = env:cli("limits", "--json")
      assert.equal(0, code, err)
      local tokens = cjson.decode(out)[1].tokens
      assert.is_true(tokens >= 96 and tokens < 100, "tokens left: " .. tostring(tokens))
      assert.equal(2, env:count("queued"))
    end)

    it("counts a concurrency cap in weighted slots", function()
      env:config([[concurrency = 4,
        limits = { ["cost.w"] = { concurrency = 10 } }]])
      env:script("cost.w", WORKER)
      local q = jr.client(env)
      assert(q:push_many({
        { "cost.w", { tag = "four", gate = true }, { cost = 4 } },
        { "cost.w", { tag = "four", gate = true }, { cost = 4 } },
        { "cost.w", { tag = "four", gate = true }, { cost = 4 } },
        { "cost.w", { tag = "two", gate = true }, { cost = 2 } },
      }))
      q:close()
      env:start()
      -- 4 + 4 + 2 = 10 slots: the third of cost 4 waits, with a worker free
      jr.wait_for(function() return #jr.lines(env.dir .. "/starts") >= 3 end, 60, "3 started")
      jr.wait_for(function() return env:count("running") == 3 end, 30, "3 running")
      local starts = jr.lines(env.dir .. "/starts")
      assert.same({ four = 2, two = 1 }, { four = count(starts, "four"), two = count(starts, "two") })
      assert.equal(1, env:count("queued"))
      jr.write_file(env.dir .. "/gate", "")
      jr.wait_for(function() return #jr.lines(env.dir .. "/starts") == 4 end, 60, "the last started")
      jr.wait_for(function() return env:idle() end, 30, "drained")
    end)

    it("takes a handler's push's cost with its success, and fails the job for one over a bucket", function()
      env:config([[limits = { ["cost.next"] = { rate = "1000/1h" } }]])
      env:script("cost.p", [[
        local jobrunner = require "jobrunner"
        return function(job)
          jobrunner.push("cost.next", { n = job.payload.n }, { cost = job.payload.cost })
        end]])
      local ok = env:push("cost.p", '{"n": 1, "cost": 250}')
      local over = env:push("cost.p", '{"n": 2, "cost": 5000}', "--max-retries", "0")
      env:start()
      env:wait_state(over, "dead", 30)
      jr.wait_for(function()
        return #env:query("SELECT id FROM jobs WHERE name = 'cost.next' AND cost = 250") == 1
      end, 30, "the follow-up of cost 250")
      assert.matches("cost 5000 is over limit 'cost.next'", env:job(over).last_error, 1, true)
      assert.equal(1, #env:query("SELECT id FROM jobs WHERE name = 'cost.next'"))
      assert.is_nil(env:job(ok))        -- succeeded, not kept
    end)

    it("refuses at push a cost over a limit's bucket, naming the limit and the cost", function()
      env:config([[limits = { ["cost.w"] = { rate = "1000/1h" },
                              ["queue:slots"] = { concurrency = 8 } }]])
      env:script("cost.w", WORKER)
      assert.equal(0, select(3, env:cli("migrate")))
      local _, err, code = env:cli("push", "cost.w", '{"tag": "x"}', "--cost", "2000")
      assert.equal(2, code)
      assert.matches([[job 'cost.w': cost 2000 is over limit 'cost.w', whose rate "1000/1h" (a bucket of 1000) holds 1000 at most]],
                     err, 1, true)
      local q = jr.client(env)
      local id, msg = q:push("cost.w", { tag = "x" }, { cost = 9, queue = "slots" })
      assert.is_nil(id)
      assert.matches("cost 9 is over limit 'queue:slots', whose concurrency 8 holds 8 at most", msg, 1, true)
      local id8 = assert(q:push("cost.w", { tag = "x" }, { cost = 8, queue = "slots" }))
      assert.equal(8, q:show(id8).cost)
      local out = env:cli("show", tostring(id8))
      assert.matches("cost%s+8 %(of its limits' tokens and slots%)", out)
      assert.equal(8, cjson.decode((env:cli("show", tostring(id8), "--json"))).cost)
      assert.has_error(function() q:push("cost.w", {}, { cost = 0 }) end)
      q:close()
      _, err, code = env:cli("push", "cost.w", "--cost", "1.5")
      assert.equal(2, code)
      assert.matches("--cost", err, 1, true)
      assert.equal(1, env:count("queued"))
    end)
  end)
end

-- fair_burst_red_spec.lua - a fair queue that is the config's only limit
-- (docs/queues.md, "Fair share": "another's push still brings a small
-- claim, so a new key's job is handed out next, not after the jobs
-- claimed ahead of it"), with the runner's local queue full of one
-- tenant's backlog, and twelve new tenants' jobs pushed at once: each is
-- a key's first job, so each is dealt in with the next small claim, on
-- each engine. Starts are counted in the order the handler records
-- them; bounds are job counts, no timings.
local jr = require "jr"

-- Records "tenant n" at each start; 1 ms long, asleep (short jobs are claimed
-- ahead in batches).
local WORKER = jr.RECORD .. [[
  local jr = require("jobrunner")
  return function(job)
    local stop = jr.now() + 0.001
    jr.sleep(math.max(0, stop - jr.now()))
    record("starts", job.payload.t .. " " .. job.payload.n)
  end]]

local function starts(env)
  return jr.lines(env.dir .. "/starts")
end

local function index_of(lines, pattern)
  for i, l in ipairs(lines) do
    if l:find(pattern) then return i end
  end
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " fair queue, a burst of new keys:", function()
    local env = jr.test_env(backend)

    -- a small claim takes 8 jobs (runtime/master/fairq.c's FAIR_PEEK);
    -- one that comes back full with a new key's job last is followed by
    -- another (before: keys 9 to 12 waited for the next claim, about 200
    -- starts after k1, on both engines)
    it("deals twelve new keys pushed at once in together", function()
      env:config([[concurrency = 1,
        limits = { ["queue:fq"] = { fair = { key = "payload.t" } } }]])
      env:script("fair.w", WORKER)
      local q = jr.client(env)
      local jobs = {}
      for i = 1, 3000 do jobs[i] = { "fair.w", { t = "a", n = i }, { queue = "fq" } } end
      assert(q:push_many(jobs))
      env:start()
      jr.wait_for(function() return #starts(env) >= 300 end, 120, "300 starts")
      jobs = {}
      for i = 1, 12 do jobs[i] = { "fair.w", { t = "k" .. i, n = i }, { queue = "fq" } } end
      assert(q:push_many(jobs))
      q:close()
      jr.wait_for(function()
        return env:count_in("queued", "running", "waiting") == 0
      end, 180, "drained")
      local s = starts(env)
      local first = index_of(s, "^k1 1$")
      for i = 2, 12 do
        local k = index_of(s, ("^k%d %d$"):format(i, i))
        -- one deal of 12 keys beside a is about 24 starts; the next
        -- claim is about 200 later
        assert.is_true(k - first <= 100, ("k%d started %d starts after k1"):format(i, k - first))
      end
    end)
  end)
end

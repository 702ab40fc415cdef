-- logs_kept_spec.lua - a run's lines when its success is kept only because
-- a client's wait began while it ran (docs/handlers.md, "Each attempt's
-- logs"): the runner was not told at the start that the success stays
-- (no retention, no result_ttl at push), the wait sets result_ttl on the
-- running job, and the lines come back with the result all the same, a
-- plain job's (whose lines wait in the worker, held past its end until
-- the runner says the row stayed) and a coroutine job's. Without the wait
-- the same success is deleted. On each backend.
local jr = require "jr"

-- Logs a line, waits for the spec's go file, logs again.
local PLAIN = [[
local jobrunner = require "jobrunner"
return function(job)
  jobrunner.log("info", "before", {user = "ada", n = 1})
  while not io.open(job.payload.go) do os.execute("sleep 0.05") end
  jobrunner.log("info", "after", {user = "ada", n = 2})
end
]]

local CO = [[
local jobrunner = require "jobrunner"
return {
  inflight = 2,
  handle = function(job)
    jobrunner.log("info", "co before", {user = "bob", n = 1})
    while not io.open(job.payload.go) do jobrunner.sleep(0.05) end
    jobrunner.log("info", "co after", {user = "bob", n = 2})
  end,
}]]

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": the lines of a success kept by a wait", function()
    local env = jr.test_env(backend)

    it("stores and shows a run's lines when a wait begun during the run keeps its success", function()
      env:config('log = { echo = false }')
      env:script("plain", PLAIN)
      env:script("co", CO)
      local go = env.dir .. "/go"
      local payload = ('{"go": "%s"}'):format(go)
      local a = env:push("plain", payload)
      local b = env:push("co", payload)
      env:start()
      env:wait_state(a, "running", 30)
      env:wait_state(b, "running", 30)
      local read = jr.wait_bg(env, tostring(a), tostring(b), "--timeout", "120")
      jr.wait_for(function()
        local rows = env:query(("SELECT count(*) AS n FROM jobs WHERE id IN (%d, %d)" ..
          " AND result_ttl IS NOT NULL"):format(a, b))
        return tonumber(rows[1].n) == 2
      end, 30, "the wait's mark on both running jobs")
      assert(io.open(go, "w")):close()
      local out, err, code = read()
      assert.equal(0, code, out .. err)
      for _, want in ipairs({
        { a, "info%s+before n=1 user=ada\n", "info%s+after n=2 user=ada\n" },
        { b, "info%s+co before n=1 user=bob\n", "info%s+co after n=2 user=bob\n" },
      }) do
        local row = env:wait_state(want[1], "completed", 30)
        assert.is_truthy(row)
        local shown, serr, scode = env:cli("show", tostring(want[1]), "--logs")
        assert.equal(0, scode, serr)
        assert.is_truthy(shown:find(want[2]), shown)
        assert.is_truthy(shown:find(want[3]), shown)
      end
      -- the same job without a wait: its success is deleted at its end
      local c = env:push("plain", payload)
      jr.wait_for(function()
        return #env:query(("SELECT id FROM jobs WHERE id = %d"):format(c)) == 0
      end, 30, "the success without a wait deleted")
      assert.equal(0, env:stop())
    end)

    it("drains and stops with lines held in its workers: a worker retired after each job, a stop mid-drain", function()
      -- log.echo off: the lines are not echoed, so they wait in
      -- the worker and a deleted success's are held for the runner's word
      env:config('concurrency = 2, max_jobs_per_worker = 1, log = { echo = false }')
      env:script("ten", [[
local log = require("jobrunner").log
return function(job)
  for i = 1, 10 do log("info", "step", {i = i}) end
end]])
      for _ = 1, 8 do env:push("ten", "{}") end
      env:start()
      jr.wait_for(function() return tonumber(env:count()) == 0 end, 60,
        "the retired workers' jobs done")
      assert.equal(0, env:stop())
      env:config('concurrency = 2, log = { echo = false }')
      for _ = 1, 60 do env:push("ten", "{}") end
      env:start()
      jr.wait_for(function() return tonumber(env:count()) < 60 end, 60, "some done")
      assert.equal(0, env:stop(nil, nil, 60))
      env:start()
      jr.wait_for(function() return tonumber(env:count()) == 0 end, 60, "the rest done")
      assert.equal(0, env:stop())
      assert.is_nil(env:log():find("not recorded", 1, true))
    end)
  end)
end

-- memlimit_redteam_spec.lua - a worker running jobs at once whose Lua
-- state passes memory_limit: the job whose allocation is refused fails,
-- the worker is replaced, and its other jobs (waiting in
-- jobrunner.sleep, their timers due meanwhile) run again unblamed: none
-- of them is resumed in the dying worker to meet the limit and die.
local jr = require "jr"

local CO = [[
  local jobrunner = require "jobrunner"
  return { inflight = 64, max_retries = 0, handle = function(job)
    local dir = os.getenv("PWD")
    local f = assert(io.open(dir .. "/runs", "a"))
    f:write(job.id, "\n")
    f:close()
    if job.payload.bomb then
      while not io.open(dir .. "/bomb") do jobrunner.sleep(0.01) end
      local t = {}
      for i = 1, 1e8 do t[i] = ("x"):rep(100) .. i end
    end
    while not io.open(dir .. "/release") do jobrunner.sleep(0.01) end
  end }]]

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " memory_limit with jobs at once:", function()
    local env = jr.test_env(backend)

    it("blames only the job that passed the limit", function()
      env:config("concurrency = { min = 1, max = 1 }, memory_limit = 64")
      env:script("co", CO)
      env:start()
      local bomb = env:push("co", '{"bomb":true}')
      for _ = 1, 63 do env:push("co") end
      jr.wait_for(function() return #jr.lines(env.dir .. "/runs") >= 64 end,
        60, "64 running")
      jr.write_file(env.dir .. "/bomb", "")
      jr.wait_for(function()
        local j = env:job(bomb)
        return j and j.state == "dead"
      end, 60, "the bomb dead")
      jr.write_file(env.dir .. "/release", "")
      jr.wait_for(function()
        return env:count("running") + env:count("queued") == 0
      end, 120, "the others ended")
      local dead = {}
      for _, j in ipairs(env:jobs("state = 'dead'")) do
        dead[#dead + 1] = ("%d: %s"):format(j.id, j.last_error)
      end
      assert.same({ ("%d: memory limit of 64 MiB exceeded"):format(bomb) }, dead)
      assert.equal(0, env:stop())
    end)
  end)
end

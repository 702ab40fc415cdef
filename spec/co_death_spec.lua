-- co_death_spec.lua - a worker running jobs at once (inflight > 1) that
-- dies between resumes, with no job in its handler: the jobs in flight go
-- back unblamed and each then runs alone, so that the job that kills its
-- worker is blamed for each death after that and ends dead after its
-- retries, while the others complete.
local jr = require "jr"

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " coroutine worker deaths:", function()
    local env = jr.test_env(backend)

    it("blame the poison job, not its companions", function()
      env:config("concurrency = { min = 1, max = 1 }")
      -- the poison job has a child kill its worker while it waits for the
      -- child: a death between resumes (as an OOM kill while a response is
      -- buffered); the companions sleep and mark their end
      env:script("co", [[
        local jobrunner = require "jobrunner"
        return { inflight = 4, max_retries = 2, backoff = 0.2,
                 handle = function(job)
          if job.payload.poison then
            local f = assert(io.open("/proc/self/stat"))
            local pid = f:read("n")
            f:close()
            jobrunner.exec({ "sh", "-c", "sleep 0.3; kill -9 " .. pid })
            jobrunner.sleep(30)
          else
            local s = assert(io.open(os.getenv("PWD") .. "/start." .. job.id,
                                     "w"))
            s:write("1") s:close()
            jobrunner.sleep(4)
            local f = assert(io.open(os.getenv("PWD") .. "/done." .. job.id,
                                     "w"))
            f:write("1") f:close()
          end
        end }]])
      env:start()
      local ids = {}
      for i = 1, 3 do ids[i] = (env:push("co", '{"n":' .. i .. '}')) end
      for _, id in ipairs(ids) do
        jr.wait_file(env.dir .. "/start." .. id, 60)
      end
      -- the three are in flight when the poison job kills their worker
      local poison = env:push("co", '{"poison":true}')
      jr.wait_for(function()
        local j = env:job(poison)
        return j and j.state == "dead"
      end, 120, "the poison job dead")
      local j = env:job(poison)
      assert.equal(3, j.attempts)               -- 1 + max_retries
      assert.matches("signal 9", j.last_error)
      for _, id in ipairs(ids) do
        jr.wait_file(env.dir .. "/done." .. id, 60)
      end
      jr.wait_for(function() return env:count() == 1 end, 60,
                  "the companions done")
      assert.matches("died between resumes with %d jobs in flight",
                     env:log())
      assert.equal(0, env:stop())
    end)
  end)
end

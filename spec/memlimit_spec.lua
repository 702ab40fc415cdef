-- memlimit_spec.lua - a worker's memory_limit: a job fails for memory only
-- when an allocation was refused for good (Lua's emergency collection that
-- frees its garbage makes the retry pass), also when the handler caught
-- the memory error; and a coroutine job failing at the limit leaves its
-- worker standing (its traceback was built unprotected under the limit:
-- "unprotected Lua error: not enough memory", signal 6), its neighbours in
-- flight completing once each.
local jr = require "jr"

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " memory_limit:", function()
    local env = jr.test_env(backend)

    for _, inflight in ipairs({ 1, 4 }) do
      it("passes a handler whose garbage the emergency collection frees (inflight " ..
         inflight .. ")", function()
        env:config("memory_limit = 64, concurrency = 1, " ..
                   "retention = { completed = '1h' }")
        env:script("garbage", ([[return { inflight = %d, max_retries = 0,
          handle = function()
            local keep = {}
            for i = 1, 30 do keep[i] = ("k"):rep(1000000) .. i end
            collectgarbage("stop")
            for i = 1, 200 do local s = ("g"):rep(1000000) .. i end
            collectgarbage("restart")
            print("handler finished")
            return #keep
          end }]]):format(inflight))
        env:start()
        local id = env:push("garbage")
        local row = jr.wait_for(function()
          local r = env:job(id)
          return r and (r.state == "completed" or r.state == "dead") and r
        end, 60)
        assert.truthy(env:log():find("handler finished"))
        assert.equal("completed", row.state, row.last_error)
      end)

      it("fails a handler that caught the memory error (inflight " .. inflight .. ")",
         function()
        env:config("memory_limit = 32, concurrency = 1")
        env:script("caught", ([[return { inflight = %d, max_retries = 0,
          handle = function()
            local ok, err = pcall(function()
              local t = {}
              for i = 1, 1e8 do t[i] = ("x"):rep(64) .. i end
            end)
            print("caught: " .. tostring(err))
            return "went on"
          end }]]):format(inflight))
        env:start()
        local id = env:push("caught")
        local row = jr.wait_for(function()
          local r = env:job(id)
          return r and r.state == "dead" and r
        end, 60)
        assert.truthy(env:log():find("caught: not enough memory"))
        assert.equal("memory limit of 32 MiB exceeded", row.last_error)
      end)
    end

    it("keeps a coroutine worker standing when a job fails at the limit", function()
      env:config("memory_limit = 32, concurrency = 1, " ..
                 "retention = { completed = '1h' }")
      -- job 1 fills the state with small objects that stay reachable from
      -- its failed coroutine, so not a byte is left for the traceback
      env:script("fill", [[
        local jobrunner = require "jobrunner"
        return { inflight = 4, max_retries = 0, handle = function(job)
          jobrunner.sleep(0.3)
          if job.payload.i == 1 then
            local head
            for i = 1, 1e9 do head = { head, i } end
          end
          jobrunner.sleep(1)
          local f = assert(io.open(os.getenv("PWD") .. "/done.log", "a"))
          f:write(job.payload.i, "\n")
          f:close()
        end }]])
      for i = 1, 4 do env:push("fill", ('{"i":%d}'):format(i)) end
      env:start()
      jr.wait_for(function()
        return env:count("dead") == 1 and env:count("completed") == 3
      end, 90)
      local dead = env:jobs("state = 'dead'")[1]
      assert.truthy(dead.payload:find('"i":%s*1[,}]'))
      assert.equal("memory limit of 32 MiB exceeded", dead.last_error)
      local log = env:log()
      assert.falsy(log:find("unprotected Lua error", 1, true))
      assert.falsy(log:find("signal 6", 1, true))
      -- each neighbour completed once
      local seen = {}
      for line in (jr.read_file(env.dir .. "/done.log") or ""):gmatch("%d+") do
        seen[#seen + 1] = tonumber(line)
      end
      table.sort(seen)
      assert.same({ 2, 3, 4 }, seen)
    end)
  end)
end

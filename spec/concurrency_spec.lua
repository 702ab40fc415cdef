-- concurrency_spec.lua - the worker count follows the load between min and
-- max: up under a backlog, down when idle, set by on_tick, nudged by
-- SIGTTIN/SIGTTOU; every change reaches on_scale.
local jr = require "jr"
local cjson = require "cjson"

local SCALE_HOOK = [[
  on_scale = function(e)
    local f = assert(io.open(os.getenv("PWD") .. "/scale", "a"))
    f:write(require("cjson").encode(e), "\n")
    f:close()
  end]]

local function scales(env)
  local out = {}
  local f = io.open(env.dir .. "/scale")
  if not f then return out end
  for l in f:lines() do out[#out + 1] = cjson.decode(l) end
  f:close()
  return out
end

-- Worker processes of the runner (its children).
local function workers(env)
  local out = jr.sh(("pgrep -P %d | wc -l"):format(env.proc.pid))
  return tonumber(out:match("%d+"))
end

local SLOW = [[
  local jobrunner = require "jobrunner"
  return function()
    local t = jobrunner.now() + 0.2
    jobrunner.sleep(math.max(0, t - jobrunner.now()))
  end]]

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " concurrency:", function()
    local env = jr.test_env(backend)

    it("adds workers under a backlog and retires idle ones", function()
      env:config("concurrency = { min = 1, max = 3 }, idle_timeout = 0.5, hooks = {" .. SCALE_HOOK .. "}")
      env:script("slow", SLOW)
      env:start()
      assert.equal(1, workers(env))
      -- one batch (a backlog at once, not a trickle of CLI pushes) of 8 s
      -- for one worker: it outlasts slow worker start-ups (ASan, a loaded
      -- CI machine), so the pool reaches its max
      local batch = {}
      for i = 1, 40 do batch[i] = { "slow" } end
      local q = assert(require("jobrunner").open(env.url, { schema = env.schema }))
      assert(q:push_many(batch))
      q:close()
      jr.wait_for(function()
        local s = scales(env)
        return #s >= 2 and s[2].to == 3
      end, 30)
      local s = scales(env)
      assert.same({ from = 1, to = 2, reason = "backlog", event = "scale" }, s[1])
      assert.same({ from = 2, to = 3, reason = "backlog", event = "scale" }, s[2])
      jr.wait_for(function() return workers(env) == 3 end)
      jr.wait_for(function() return env:count() == 0 end, 30)
      jr.wait_for(function() return workers(env) == 1 end, 30)
      s = scales(env)
      assert.equal("idle", s[#s].reason)
      assert.equal(1, s[#s].to)
      for _, e in ipairs(s) do
        assert.is_true(e.to >= 1 and e.to <= 3)
      end
    end)

    it("lets on_tick set the target, clamped to min..max", function()
      env:config([[concurrency = { min = 1, max = 4 }, tick_interval = 0.2, idle_timeout = 1000,
        hooks = { on_tick = function(e)
          local f = io.open(os.getenv("PWD") .. "/want")
          local n = f and tonumber(f:read("a"))
          if f then f:close() end
          return n
        end, ]] .. SCALE_HOOK .. "}")
      env:script("x", "return function() end")
      env:start()
      jr.write_file(env.dir .. "/want", "3")
      jr.wait_for(function() return workers(env) == 3 end)
      local s = scales(env)
      assert.same({ from = 1, to = 3, reason = "tick", event = "scale" }, s[1])
      jr.write_file(env.dir .. "/want", "10")
      jr.wait_for(function() return workers(env) == 4 end)
      jr.write_file(env.dir .. "/want", "0")
      jr.wait_for(function() return workers(env) == 1 end)
      s = scales(env)
      assert.equal(4, s[2].to)
      assert.equal(1, s[3].to)
    end)

    it("adds and removes one worker on SIGTTIN and SIGTTOU", function()
      env:config("concurrency = { min = 1, max = 3 }, idle_timeout = 1000, hooks = {" .. SCALE_HOOK .. "}")
      env:script("x", "return function() end")
      env:start()
      env:signal("TTIN")
      jr.wait_for(function() return workers(env) == 2 end)
      env:signal("TTIN")
      jr.wait_for(function() return workers(env) == 3 end)
      env:signal("TTIN")                -- max: stays 3
      env:signal("TTOU")
      jr.wait_for(function() return workers(env) == 2 end)
      local s = scales(env)
      assert.equal(3, #s)
      assert.same({ from = 2, to = 3, reason = "signal", event = "scale" }, s[2])
      assert.same({ from = 3, to = 2, reason = "signal", event = "scale" }, s[3])
      env:push("x")
      jr.wait_for(function() return env:count() == 0 end)
    end)

    it("replaces a worker that dies unexpectedly", function()
      env:config("concurrency = 2")
      env:script("x", "return function() end")
      env:start()
      jr.wait_for(function() return workers(env) == 2 end)
      local pid = jr.sh(("pgrep -P %d | head -1"):format(env.proc.pid)):match("%d+")
      os.execute("kill -9 " .. pid)
      jr.wait_for(function()
        local out = jr.sh(("pgrep -P %d"):format(env.proc.pid))
        return not out:find("^" .. pid .. "\n") and not out:find("\n" .. pid .. "\n")
          and workers(env) == 2
      end)
      env:push("x")
      jr.wait_for(function() return env:count() == 0 end)
    end)
  end)
end

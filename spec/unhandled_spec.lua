-- unhandled_spec.lua - the count of queued jobs no handler takes, asked
-- for by a reload, on both backends: after the runner's first count, a
-- job under a new name is named in the log soon after `jobrunner reload`,
-- even when the handlers did not change (the next count of its own is a
-- minute away or more).
local jr = require "jr"

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " unhandled names:", function()
    local env = jr.test_env(backend)

    it("are counted again at once by a reload that keeps the handlers",
      function()
      env:script("known", "return function() end")
      env:config("poll_interval = 0.2")
      env:push("first.name")
      env:start()
      jr.wait_for(function()
        return env:log():find("1 queued job named 'first.name'", 1, true)
      end, 30, "the first count")
      env:push("second.name")
      local _, err, code = env:cli("reload")
      assert.equal(0, code, err)
      jr.wait_for(function()
        return env:log():find("reload: handlers unchanged", 1, true)
      end, 30, "the reload")
      -- the period is a minute or more: only the reload's count is in time
      jr.wait_for(function()
        return env:log():find("1 queued job named 'second.name'", 1, true)
      end, 30, "the count the reload asked for")
      local n = 0
      for _ in env:log():gmatch("named 'first%.name'") do n = n + 1 end
      assert.equal(1, n)
      assert.equal(0, env:stop())
    end)
  end)
end

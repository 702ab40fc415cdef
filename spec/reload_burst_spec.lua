-- reload_burst_spec.lua - a burst of reloads never runs more worker
-- processes than concurrency.max plus the one loading the new code: a
-- worker told to stop is a process until it has exited, and neither a
-- replacement nor the next reload's loader starts before it is gone.
local jr = require "jr"

-- The live (not zombie) child processes of pid: its workers.
local function children(pid)
  local f = io.open(("/proc/%d/task/%d/children"):format(pid, pid))
  if not f then return nil end
  local list = f:read("a")
  f:close()
  local n = 0
  for kid in list:gmatch("%d+") do
    local s = io.open("/proc/" .. kid .. "/stat")
    local stat = s and s:read("l")
    if s then s:close() end
    if stat and not stat:match("^%d+ %b() [ZX]") then n = n + 1 end
  end
  return n
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " reload burst:", function()
    local env = jr.test_env(backend, {
      config = "concurrency = { min = 4, max = 4 }, watch = false" })

    it("keeps the worker processes at max + 1 over a burst of SIGHUPs", function()
      -- a worker takes a second to exit once told to stop (a finalizer
      -- run when its Lua state closes): the window in which the old code
      -- started the next loader, or a replacement, beside it
      env:script("slow_exit", [[
        _G.slow_exit_guard = setmetatable({}, { __gc = function()
          os.execute("sleep 1")
        end })
        return function() end]])
      local p = env:start()
      jr.wait_for(function() return children(p.pid) == 4 end, 30,
                  "4 workers")
      local most, t_end = 0, jr.now() + 8
      local sent = 0
      while jr.now() < t_end do
        if sent < 50 then
          env:signal("HUP")
          sent = sent + 1
        end
        local n = children(p.pid)
        if n and n > most then most = n end
        jr.sleep(0.02)
      end
      assert.is_true(most <= 5, ("%d worker processes at once (max 4 " ..
                                 "plus the loader)"):format(most))
      -- the runner still works, with its 4 workers back
      jr.wait_for(function() return children(p.pid) == 4 end, 60,
                  "4 workers after the burst")
      env:script("done", [[return function(job)
        local f = assert(io.open(os.getenv("PWD") .. "/done." .. job.id, "w"))
        f:write("1") f:close() end]])
      env:signal("HUP")
      jr.wait_for(function()
        return env:log():find("reloaded: generation")
      end, 60, "the reload after the burst")
      local id = env:push("done")
      jr.wait_file(env.dir .. "/done." .. id, 60)
      assert.equal(0, env:stop())
    end)
  end)
end

-- deadline_spec.lua - a handler's timeout and a cancel reach a Lua loop
-- wherever it runs: in the handler, in a coroutine the handler made
-- itself (coroutine.wrap, coroutine.create and resume, nested), behind a
-- pcall or a resume that swallows the error, in a plain job and in a
-- coroutine job (inflight > 1). Each ends as "spin.lua:LINE: timed out
-- after 1s" (in a coroutine job the line may be the worker's own resume
-- that waits for the loop, with the loop's line in the traceback), from
-- the worker, not the master's kill of a stuck worker (which comes 5 s
-- later and says "(worker killed)").
local jr = require "jr"

-- Line numbers matter: LINES below names the lines of each case where
-- the error may be raised: the loop's, or the line of the resume that
-- waits for it (every thread that runs is interrupted: the first that
-- runs an instruction raises).
local SPIN = [[
local jobrunner = require "jobrunner"
local cases = {}
cases.wrap = function()
  coroutine.wrap(function() while true do end end)()
end
cases.create = function()
  local co = coroutine.create(function() local n = 0; while true do n = n + 1 end end)
  error(select(2, coroutine.resume(co)), 0)
end
cases.nested = function()
  coroutine.wrap(function()
    local co = coroutine.create(function() while true do end end)
    error(select(2, coroutine.resume(co)), 0)
  end)()
end
cases.swallowed = function()
  while true do
    coroutine.resume(coroutine.create(function() while true do end end))
  end
end
cases.pcall = function()
  while true do pcall(string.rep, "x", 10) end
end
cases.yielding = function()
  local co = coroutine.wrap(function()
    while true do coroutine.yield() end
  end)
  while true do co() end
end
return { inflight = %d, timeout = 1, max_retries = 0, handle = function(job)
  local f = assert(io.open(job.payload.file, "a"))
  f:write(job.id, "\n")
  f:close()
  return cases[job.payload.what]()
end }
]]
local LINES = { wrap = { 4 }, create = { 7, 8 }, nested = { 11, 12, 13, 14 },
                swallowed = { 18 }, pcall = { 22 }, yielding = { 26, 28 } }

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " deadlines:", function()
    local env = jr.test_env(backend, { config = "concurrency = 4" })

    for _, inflight in ipairs({ 1, 3 }) do
      it(("times out a loop in the handler's own coroutines at its line (inflight = %d)")
         :format(inflight), function()
        env:config("concurrency = 6")
        env:script("spin", SPIN:format(inflight))
        env:start()
        local file = env.dir .. "/started"
        local ids = {}
        for what in pairs(LINES) do
          ids[what] = env:push("spin", ('{"file":"%s","what":"%s"}'):format(file, what))
        end
        for what, id in pairs(ids) do
          local row = env:wait_state(id, "dead", 30)
          -- "file:line: timed out" (the line of the thread that ran),
          -- and the loop's line of spin.lua in it or its traceback
          assert.truthy(row.last_error:find("^[^\n]-:%d+: timed out after 1s"),
                        what .. ": " .. row.last_error)
          local known = false
          for _, l in ipairs(LINES[what]) do
            known = known or row.last_error:find("spin.lua:" .. l .. ":", 1, true) ~= nil
          end
          assert.is_true(known, what .. ": " .. row.last_error)
          assert.is_nil(row.last_error:find("killed", 1, true), row.last_error)
        end
        assert.is_true(env:alive())
        assert.equal(0, env:stop())
      end)
    end

    it("cancels a loop in a coroutine the handler made", function()
      env:script("busy", [[
        return { timeout = 600, max_retries = 0, handle = function(job)
          local f = assert(io.open(job.payload.file, "a"))
          f:write(job.id, "\n")
          f:close()
          local co = coroutine.create(function() while true do end end)
          while true do coroutine.resume(co) end
        end }]])
      env:start()
      local file = env.dir .. "/started"
      local id = env:push("busy", ('{"file":"%s"}'):format(file))
      jr.wait_for(function() return #jr.lines(file) == 1 end, 20, "started")
      local _, err, code = env:cli("cancel", tostring(id))
      assert.equal(0, code, err)
      local row = env:wait_state(id, "cancelled", 30)
      assert.matches("cancelled while running", row.last_error, 1, true)
      assert.is_nil(row.last_error:find("killed", 1, true), row.last_error)
      assert.equal(0, env:stop())
    end)
  end)
end

-- handler_fds_spec.lua - what a handler's own child processes inherit: its
-- output (stdout and stderr go to the job's log), never the worker's
-- socket to the master. A process a handler started (a `sleep` in the
-- background, a daemon) held that socket open after its worker was gone.
local jr = require "jr"

describe("handlers' child processes", function()
  local env = jr.test_env("sqlite")

  it("do not inherit the worker's socket to the master", function()
    env:script("fds", [[
      return function(job)
        assert(os.execute("ls -l /proc/$$/fd > " .. os.getenv("PWD") .. "/fds.txt"))
      end]])
    env:push("fds", "{}")
    local p = env:start()
    jr.wait_for(function() return env:count() == 0 end, 20, "job ran")
    assert.equal(0, env:stop("TERM", p))
    local text = jr.read_file(env.dir .. "/fds.txt")
    assert.is_truthy(text, "the handler's shell listed nothing")
    assert.is_truthy(text:find("pipe:", 1, true), text)   -- its output
    assert.is_nil(text:find("socket:", 1, true), text)
  end)
end)

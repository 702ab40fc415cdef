-- lease_undo_spec.lua - a result or claim that a database crash undid
-- while the runner stayed up. PostgreSQL acknowledges the runner's own
-- commits before they are durable (synchronous_commit = off), so a server
-- crash can put a job the runner finished back to `running` under the
-- runner's own token. The runner must not keep such a row alive: it
-- renews the leases of the jobs it holds, not every row that bears its
-- token, so the row's lease expires, the rescue requeues it and the job
-- runs again (make crash found jobs left `running` for ever after
-- PostgreSQL crashes). The undone completion is made here by hand: a row
-- put to `running` under the live runner's token.
local jr = require "jr"

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": an undone completion", function()
    local env = jr.test_env(backend, { config = "concurrency = 1, lease = 1" })

    it("is rescued and runs again while the runner stays up", function()
      local ledger = env.dir .. "/ledger"
      env:script("t", ([[
        return function(job)
          while not io.open(%q) do
            local t = os.clock() + 0.01
            while os.clock() < t do end
          end
          local f = assert(io.open(%q, "a"))
          f:write(job.id, "\n")
          f:close()
        end]]):format(env.dir .. "/go", ledger))
      local a = env:push("t")
      local b = env:push("t", nil, "--in", "1h")
      env:start()
      local row = env:wait_state(a, "running")
      local token = assert(row.locked_by)
      -- what a crash leaves of a finished job whose completion it undid:
      -- running, under this runner's token, with a lease still valid
      local soon = backend == "postgres" and "now() + interval '1 second'" or
        "(julianday('now') - 2440587.5) * 86400.0 + 1"
      local now = backend == "postgres" and "now()" or
        "(julianday('now') - 2440587.5) * 86400.0"
      env:exec(("UPDATE jobs SET state = 'running', locked_by = '%s', " ..
        "locked_until = %s, run_at = %s WHERE id = %d"):format(token, soon, now, b))
      jr.write_file(env.dir .. "/go", "")
      local ok = pcall(jr.wait_for, function()
        for _, id in ipairs(jr.lines(ledger)) do
          if tonumber(id) == b then return true end
        end
      end, 15)
      local left = env:job(b)
      assert(ok, ("job %d never ran again: %s; runner log:\n%s"):format(b,
        left and (left.state .. " locked_by " .. tostring(left.locked_by)) or "gone",
        env:log()))
      jr.wait_for(function() return env:count() == 0 end, 10)
      assert.is_true(env:alive())
    end)
  end)
end

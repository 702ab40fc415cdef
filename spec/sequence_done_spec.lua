-- sequence_done_spec.lua - the success of a job of a sequence with a job
-- behind it (docs/queues.md, "Sequences", what it costs), on each
-- backend: its row goes as a plain success's does, in the batch's
-- statements, and the next job of the sequence is readied in the same
-- transaction with job.parents naming the one before, completed; a job
-- that waits for a job of a sequence and for another job (after) is
-- readied only once both ended.
local jr = require "jr"
local cjson = require "cjson"

local WORKER = jr.RECORD .. [[
  local cjson = require "cjson"
  return function(job)
    local p = {}
    for id, e in pairs(job.parents or {}) do p[#p + 1] = id .. "=" .. e.state end
    table.sort(p)
    record("done", ("%s %d %s"):format(job.payload.k, job.payload.n,
                                       table.concat(p, ",")))
  end]]

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " sequences, a success:", function()
    local env = jr.test_env(backend)

    it("goes as a plain success and readies the next with job.parents", function()
      env:config("concurrency = 4")
      env:script("step", WORKER)
      local ids = { a = {}, b = {} }
      for n = 1, 5 do
        for _, k in ipairs({ "a", "b" }) do
          ids[k][n] = env:push("step", cjson.encode({ k = k, n = n }),
                               "--sequence", "s-" .. k)
        end
      end
      -- a job after a's second and a plain job: it needs both
      local plain = env:push("step", cjson.encode({ k = "p", n = 1 }),
                             "--in", "2s")
      local both = env:push("step", cjson.encode({ k = "x", n = 1 }),
                            "--after", ids.a[2] .. "," .. plain)
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/done") == 12 end,
                  60, "12 jobs done")
      assert.equal(0, env:stop())
      local seen = {}
      for _, l in ipairs(jr.lines(env.dir .. "/done")) do
        local k, n, parents = l:match("^(%S+) (%d+) ?(%S*)$")
        seen[k .. n] = parents
      end
      for _, k in ipairs({ "a", "b" }) do
        assert.equal("", seen[k .. "1"])
        for n = 2, 5 do
          assert.equal(ids[k][n - 1] .. "=completed", seen[k .. n])
        end
        -- each success went as a plain one: no row kept
        for n = 1, 5 do assert.is_nil(env:job(ids[k][n]), k .. n) end
      end
      local want = { tostring(ids.a[2]) .. "=completed",
                     tostring(plain) .. "=completed" }
      table.sort(want)
      assert.equal(table.concat(want, ","), seen.x1)
      assert.equal(0, env:count("waiting"))
      assert.equal(0, env:count("queued"))
      local row = env:job(both)
      assert.is_true(row == nil or row.state == "completed")
    end)
  end)
end

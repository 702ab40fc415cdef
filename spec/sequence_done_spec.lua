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

    -- Runs a runner until n jobs are done (timeout seconds at most), stops
    -- it; returns the parents each job done named, by its k and n.
    local function run_done(n, timeout)
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/done") == n end,
                  timeout, n .. " jobs done")
      assert.equal(0, env:stop())
      local seen = {}
      for _, l in ipairs(jr.lines(env.dir .. "/done")) do
        local k, i, parents = l:match("^(%S+) (%d+) ?(%S*)$")
        seen[k .. i] = parents
      end
      return seen
    end

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
      local seen = run_done(12, 60)
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

    it("readies a job of more than one edge with job.parents naming each", function()
      -- in 4 sequences, c waits for b, cancelled while it waited, and so
      -- for a: its edges are a's and b's; y waits for x and for p, run
      -- before x. The a's, then the x's, end together (a barrier), so
      -- that their ends come in batches of results
      env:config("concurrency = 8")
      env:script("step", WORKER)
      env:script("meet", jr.RECORD .. [[
        local now = require("jobrunner").now
        return function(job)
          local g, t0 = job.payload.k, now()
          record(g .. ".in", "1")
          while now() < t0 + 5 do
            local n = 0
            for _ in io.lines(os.getenv("PWD") .. "/" .. g .. ".in") do n = n + 1 end
            if n >= 4 then break end
          end
          record("done", ("%s %d"):format(g, job.payload.n))
        end]])
      local function push(name, k, n, ...)
        return env:push(name, cjson.encode({ k = k, n = n }), ...)
      end
      local p, a, b, c, x, y = {}, {}, {}, {}, {}, {}
      for i = 1, 4 do p[i] = push("step", "p", i) end
      for i = 1, 4 do
        a[i] = push("meet", "a", i, "--sequence", "c" .. i)
        b[i] = push("step", "b", i, "--sequence", "c" .. i)
        c[i] = push("step", "c", i, "--sequence", "c" .. i)
        x[i] = push("meet", "x", i, "--sequence", "y" .. i)
        y[i] = push("step", "y", i, "--after", x[i] .. "," .. p[i])
      end
      for i = 1, 4 do
        local out, err, code = env:cli("cancel", tostring(b[i]))
        assert.equal(0, code, out .. err)
      end
      local seen = run_done(20, 120)
      local function two(e1, e2)
        local w = { e1, e2 }
        table.sort(w)
        return table.concat(w, ",")
      end
      for i = 1, 4 do
        assert.equal(two(a[i] .. "=completed", b[i] .. "=cancelled"), seen["c" .. i])
        assert.equal(two(x[i] .. "=completed", p[i] .. "=completed"), seen["y" .. i])
      end
    end)
  end)
end

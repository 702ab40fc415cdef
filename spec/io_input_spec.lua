-- io_input_spec.lua - what handlers hand to jobrunner.exec: its argv of
-- numbers reaches the child intact under a collector that runs all the
-- time, a refused exec frees what it took (the worker's memory stays flat
-- over a hundred of them), NUL bytes in argv and env are refused, not cut.
local jr = require "jr"
local cjson = require "cjson"

-- Runs one job of handler name with payload (a table; "out" is added) and
-- returns the lines it wrote to the file named by its payload's "out".
local function run_job(env, name, payload)
  local out = env.dir .. "/" .. name .. ".out"
  payload = payload or {}
  payload.out = out
  env:push(name, cjson.encode(payload))
  env:start()
  jr.wait_for(function() return env:count() == 0 or env:count("dead") > 0 end,
              120, "job " .. name)
  assert.equal(0, env:count("dead"), (env:jobs()[1] or {}).last_error)
  return jr.lines(out)
end

-- The handlers below write lines with out(job, line).
local OUT = [[
local jobrunner = require "jobrunner"
local function out(job, line)
  local f = assert(io.open(job.payload.out, "a"))
  f:write(line:gsub("\n", "|"), "\n")
  f:close()
end
]]

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " what handlers hand to exec and http:", function()
    local env = jr.test_env(backend)

    it("keeps exec's argv of numbers intact while the collector runs", function()
      env:config("concurrency = 1")
      env:script("gcargs", OUT .. [[
        return { inflight = 4, handle = function(job)
          -- a collector that never pauses and does much per allocation
          collectgarbage("incremental", 1, 1000, 0)
          local bad = 0
          for i = 1, 150 do
            local junk = {}
            for k = 1, 20 do junk[k] = { k .. ":" .. i } end
            local r = assert(jobrunner.exec({ "echo", 3, 3.5, i, i + 0.25, -i },
              { env = { JR_PAD = ("e"):rep(i) } }))
            local want = ("3 3.5 %d %s %d\n"):format(i, tostring(i + 0.25), -i)
            if r.stdout ~= want then
              bad = bad + 1
              if bad <= 3 then out(job, "bad: " .. r.stdout) end
            end
          end
          collectgarbage("incremental", 200, 100, 13)
          out(job, "done, " .. bad .. " bad")
        end }]])
      local lines = run_job(env, "gcargs")
      assert.same({ "done, 0 bad" }, lines)
    end)

    it("frees what a refused exec took: 120 bad envs, memory flat", function()
      env:config("concurrency = 1")
      env:script("badenv", OUT .. [[
        local function rss()     -- kB, of this worker
          local f = assert(io.open("/proc/self/status"))
          local s = f:read("a")
          f:close()
          return tonumber(s:match("VmRSS:%s*(%d+)"))
        end
        return function(job)
          local input = ("i"):rep(1 << 20)
          local errs, first = 0, nil
          local function try()
            local ok, err = pcall(jobrunner.exec, { "cat" },
              { stdin = input, env = { JR_OK = "1", JR_N = 1 } })
            assert(not ok, "ran with a bad env")
            first = first or err
            errs = errs + 1
          end
          for _ = 1, 10 do try() end
          collectgarbage()
          local before = rss()
          for _ = 1, 120 do try() end
          collectgarbage()
          out(job, ("%d errors, grew %d kB"):format(errs, rss() - before))
          out(job, first)
        end]])
      local lines = run_job(env, "badenv")
      local errs, grew = lines[1]:match("^(%d+) errors, grew (%-?%d+) kB$")
      assert.equal("130", errs)
      assert.is_true(tonumber(grew) < 20 * 1024, lines[1])
      assert.truthy(lines[2]:find("env 'JR_N' must be a string, got number",
                                  1, true), lines[2])
    end)

    it("refuses NUL bytes in exec's argv, env and cwd", function()
      env:config("concurrency = 1")
      env:script("nul", OUT .. [[
        return function(job)
          local function try(argv, opts)
            local ok, err = pcall(jobrunner.exec, argv, opts)
            out(job, ok and ("ran: " .. (err and err.stdout or "?")) or err)
          end
          try({ "echo", "a\0b" })
          try({ "echo\0x", "a" })
          try({ "sh", "-c", 'echo "[$JR_X]"' }, { env = { JR_X = "a\0b" } })
          try({ "sh", "-c", 'echo "[$JR_X]"' }, { env = { ["JR_X\0Y"] = "a" } })
          try({ "sh", "-c", 'echo "[$JR_X]"' }, { env = { ["JR_X=Y"] = "a" } })
          try({ "sh", "-c", 'echo "[$JR_X]"' }, { env = { [""] = "a" } })
          try({ "pwd" }, { cwd = "/\0tmp" })
          try({ "echo", "a\tb", 7 })
        end]])
      local lines = run_job(env, "nul")
      assert.equal(8, #lines, table.concat(lines, "\n"))
      local want = {
        "jobrunner.exec: argv[2] contains a NUL byte",
        "jobrunner.exec: argv[1] contains a NUL byte",
        "jobrunner.exec: env 'JR_X' contains a NUL byte",
        "jobrunner.exec: env name 'JR_X' contains a NUL byte",
        "jobrunner.exec: env name 'JR_X=Y' contains '='",
        "jobrunner.exec: an env name is empty",
        "jobrunner.exec: 'cwd' contains a NUL byte",
      }
      for i, w in ipairs(want) do
        assert.truthy(lines[i]:find(w, 1, true), "want " .. w .. ", got " .. lines[i])
      end
      assert.equal("ran: a\tb 7|", lines[8])
    end)
  end)
end

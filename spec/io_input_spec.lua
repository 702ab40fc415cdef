-- io_input_spec.lua - what handlers hand to jobrunner.exec and
-- jobrunner.http: exec's argv of numbers reaches the child intact under a
-- collector that runs all the time, a refused exec frees what it took (the
-- worker's memory stays flat over a hundred of them), NUL bytes in argv
-- and env are refused, not cut; http refuses CR, LF and other control
-- bytes in the method, a header's name or value and the url, so nothing
-- injected reaches the server (spec/helpers/rawhttp.c records the bytes it
-- receives).
local jr = require "jr"
local q = jr.quote
local cjson = require "cjson"

local recorder = require("rawhttp").recorder

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

teardown(function() require("rawhttp").cleanup() end)

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

    for _, inflight in ipairs({ 1, 4 }) do
      it("refuses control bytes in http's request (inflight " .. inflight .. ")", function()
        local rec = env.dir .. "/received"
        local base, stop = recorder(rec)
        finally(stop)
        env:config("concurrency = 1")
        env:script("inject", OUT .. [[
          return { inflight = ]] .. inflight .. [[, handle = function(job)
            local base = job.payload.base
            local function try(what, req)
              req.url = req.url or base .. "/ok"
              req.timeout = 10
              local ok, r, err = pcall(jobrunner.http, req)
              out(job, what .. ": " .. (ok and (r and ("status " .. r.status)
                                                   or ("nil, " .. err)) or r))
            end
            try("value", { headers = { ["X-A"] = "1\r\nX-Injected: yes" } })
            try("value lf", { headers = { ["X-A"] = "1\nX-Injected: yes" } })
            try("value cr", { headers = { ["X-A"] = "1\rX-Injected: yes" } })
            try("value nul", { headers = { ["X-A"] = "1\0X-Injected: yes" } })
            try("value del", { headers = { ["X-A"] = "1\127" } })
            try("name", { headers = { ["X-A: 1\r\nX-Injected"] = "yes" } })
            try("name colon", { headers = { ["X-Injected: yes\r\nX-B"] = "1" } })
            try("name space", { headers = { ["X A"] = "1" } })
            try("name empty", { headers = { [""] = "1" } })
            try("method", { method = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\nGET" })
            try("method lf", { method = "GET\nX-Injected: yes\n" })
            try("method space", { method = "GET /smuggled" })
            try("method empty", { method = "" })
            try("url", { url = base .. "/ok HTTP/1.1\r\nX-Injected: yes\r\n\r\nGET /smuggled" })
            try("url lf", { url = base .. "/ok\nX-Injected: yes" })
            try("url space", { url = base .. "/ok /smuggled" })
            try("url nul", { url = base .. "/ok\0/smuggled" })
            try("good", { method = "PATCH", headers = { ["X-Good"] = "a\tb c" } })
          end }]])
        local lines = run_job(env, "inject", { base = base })
        local want = {
          { "value", "header 'X-A' value has byte 13 at position 2" },
          { "value lf", "header 'X-A' value has byte 10 at position 2" },
          { "value cr", "header 'X-A' value has byte 13 at position 2" },
          { "value nul", "header 'X-A' value has byte 0 at position 2" },
          { "value del", "header 'X-A' value has byte 127 at position 2" },
          { "name", "header name 'X-A' has byte 58 at position 4" },
          { "name colon", "header name 'X-Injected' has byte 58 at position 11" },
          { "name space", "header name 'X' has byte 32 at position 2" },
          { "name empty", "a header name is empty" },
          { "method", "the method has byte 32 at position 4" },
          { "method lf", "the method has byte 10 at position 4" },
          { "method space", "the method has byte 32 at position 4" },
          { "method empty", "the method is empty" },
          { "url", "the url has byte 32 at position " .. #base + 4 },
          { "url lf", "the url has byte 10 at position " .. #base + 4 },
          { "url space", "the url has byte 32 at position " .. #base + 4 },
          { "url nul", "the url has byte 0 at position " .. #base + 4 },
          { "good", "status 200" },
        }
        assert.equal(#want, #lines, table.concat(lines, "\n"))
        for i, w in ipairs(want) do
          assert.equal(w[1] .. ":", lines[i]:match("^[^:]*:"))
          assert.truthy(lines[i]:find(w[2], 1, true),
                        "want " .. w[2] .. ", got " .. lines[i])
        end
        -- the good request reached the recorder, nothing injected did
        local got = jr.wait_for(function()
          local s = jr.read_file(rec) or ""
          return s:find("X-Good: a\tb c", 1, true) and s
        end, 10, "the good request")
        assert.falsy(got:find("X-Injected", 1, true), got)
        assert.falsy(got:find("smuggled", 1, true), got)
        local _, requests = got:gsub("HTTP/1.1\r\n", "")
        assert.equal(1, requests, got)
      end)
    end
  end)
end

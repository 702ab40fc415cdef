-- io_redteam_spec.lua - jobrunner.exec and jobrunner.http against what an
-- attacker or a careless handler hands them: a result too large for the
-- Lua state's memory_limit (it was built in the loop's callback, and the
-- memory error jumped through libevent), a child's descendant that left
-- its process group holding stdout, the worker's sockets inherited by a
-- child, a timeout too large for a timeval, a HEAD request, a
-- Content-Length that disagrees with the body (a smuggled request),
-- credentials in the url shown in messages, request heads over libcurl's
-- limit, many headers, a 'verify' that is not a boolean. The HTTP servers are bench/slowhttp (build/bench/)
-- and spec/helpers/rawhttp.c (built here), which records the bytes it
-- receives.
local jr = require "jr"
local q = jr.quote
local cjson = require "cjson"

local slow_server = require("rawhttp").slow

local recorder = require("rawhttp").recorder

-- Pushes one job of handler name with payload (a table; "out" is added),
-- waits for it to end (done or dead) and returns the lines it wrote to the
-- file named by its payload's "out" and its row when it went dead.
local function run_job(env, name, payload, wait)
  local out = env.dir .. "/" .. name .. (payload and payload.tag or "") .. ".out"
  payload = payload or {}
  payload.out = out
  env:push(name, cjson.encode(payload))
  if not env.proc then env:start() end
  jr.wait_for(function() return env:count() == 0 or env:count("dead") > 0 end,
              wait or 120, "job " .. name)
  return jr.lines(out), env:jobs("state = 'dead'")[1]
end

local OUT = [[
local jobrunner = require "jobrunner"
local function out(job, line)
  local f = assert(io.open(job.payload.out, "a"))
  f:write((tostring(line):gsub("\n", "|")), "\n")
  f:close()
end
local function now()
  local f = assert(io.open("/proc/uptime"))
  local s = f:read("n")
  f:close()
  return s
end
]]

teardown(function() require("rawhttp").cleanup() end)

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " exec and http attacked:", function()
    local env = jr.test_env(backend)

    for _, inflight in ipairs({ 1, 4 }) do
      it("fails a result over memory_limit as the job's, the worker goes on (inflight "
         .. inflight .. ")", function()
        local base, stop = slow_server()
        finally(stop)
        env:config("concurrency = 1, memory_limit = 32")
        env:script("big", OUT .. [[
          return { inflight = ]] .. inflight .. [[, max_retries = 0, timeout = 60,
            handle = function(job)
              local r, err
              if job.payload.what == "exec" then
                r, err = jobrunner.exec({ "head", "-c", "50000000", "/dev/zero" })
              else
                r, err = jobrunner.http{ url = job.payload.base .. "/?bytes=50000000",
                                         max_size = 60000000 }
              end
              out(job, r and ("got " .. #(r.stdout or r.body)) or ("nil, " .. err))
            end }]])
        env:script("small", OUT .. [[
          return function(job)
            out(job, jobrunner.exec({ "echo", "after" }).stdout)
          end]])
        for _, what in ipairs({ "exec", "http" }) do
          local lines, dead = run_job(env, "big", { what = what, base = base,
                                                tag = what }, 60)
          assert.truthy(dead, "the job did not fail")
          assert.truthy(dead.last_error:find("memory limit of 32 MiB exceeded", 1, true),
                        dead.last_error)
          assert.equal(1, #lines, table.concat(lines, "\n"))
          assert.truthy(lines[1]:find("^nil, jobrunner%." .. what .. ": .*memory"),
                        lines[1])
          env:exec("DELETE FROM jobs")
        end
        local lines = run_job(env, "small")
        assert.same({ "after|" }, lines)
        assert.falsy(env:log():find("reentrant", 1, true), env:log())
      end)

      it("gives a child no fd but 0 1 2, waits not for what left its group, "
         .. "takes any timeout (inflight " .. inflight .. ")", function()
        local base, stop = slow_server()
        local pidfile = env.dir .. "/escaped.pid"
        -- one finally a test (busted keeps the last one given)
        finally(function()
          stop()
          local pid = (jr.read_file(pidfile) or ""):match("%d+")
          if pid then os.execute("kill " .. pid .. " 2>/dev/null") end
        end)
        env:config("concurrency = 1")
        env:script("kids", OUT .. [[
          return { inflight = ]] .. inflight .. [[, max_retries = 0, timeout = 40,
            handle = function(job)
              -- a request first: libcurl keeps its connection and sockets
              local r = assert(jobrunner.http{ url = job.payload.base .. "/" })
              local f = assert(io.open(job.payload.out .. ".open", "w"))
              r = assert(jobrunner.exec({ "sh", "-c", "ls /proc/$$/fd" }))
              f:close()
              out(job, "fds " .. r.stdout)
              -- a grandchild that leaves the group and keeps stdout
              local t0 = now()
              r = assert(jobrunner.exec({ "sh", "-c",
                "setsid sh -c 'echo $$ > " .. job.payload.pidfile .. "; exec sleep 60' & " ..
                "sleep 1; echo started" }, { timeout = 5 }))
              out(job, ("escaped: status %d, %s in %s"):format(r.status, r.stdout,
                now() - t0 < 20 and "time" or (now() - t0) .. "s"))
              r, err = jobrunner.exec({ "sh", "-c", "sleep 0.3; echo ok" },
                                      { timeout = 1e300 })
              out(job, "timeout 1e300: " .. (r and r.stdout or err))
              r, err = jobrunner.exec({ "sh", "-c", "sleep 0.3; echo ok" },
                                      { timeout = 2^63 })
              out(job, "timeout 2^63: " .. (r and r.stdout or err))
              -- a length no table has: (n + 1) pointers overflowed an int
              local ok, e = pcall(jobrunner.exec, setmetatable({}, {
                __len = function() return 2^31 - 1 end }))
              out(job, "huge len: " .. tostring(e))
            end }]])
        local lines, dead = run_job(env, "kids", { base = base, pidfile = pidfile }, 60)
        assert.falsy(dead, dead and dead.last_error)
        assert.same({ "fds 0|1|2|", "escaped: status 0, started| in time",
                      "timeout 1e300: ok|", "timeout 2^63: ok|",
                      "huge len: jobrunner.exec: argv has 2147483647 elements, "
                      .. "more than 1048576" }, lines)
      end)
    end

    for _, inflight in ipairs({ 1, 4 }) do
      it("sends HEAD, no smuggling Content-Length, no password in messages, "
         .. "heads within limits (inflight " .. inflight .. ")", function()
        local base, stop = slow_server()
        local rec = env.dir .. "/received"
        local rbase, rstop = recorder(rec)
        finally(function() stop(); rstop() end)  -- busted keeps one
        env:config("concurrency = 1")
        env:script("req", OUT .. [[
          return { inflight = ]] .. inflight .. [[, max_retries = 0, timeout = 100,
            handle = function(job)
              local function try(what, req)
                req.url = req.url or job.payload.rbase .. "/ok"
                req.timeout = req.timeout or 20
                local t0 = now()
                local ok, r, err = pcall(jobrunner.http, req)
                out(job, what .. ": " .. (ok and (r and ("status " .. r.status ..
                  (#r.body > 0 and " body" or "")) or ("nil, " .. err)) or r) ..
                  (now() - t0 < 8 and "" or " slow"))
              end
              try("head", { url = job.payload.base .. "/", method = "HEAD" })
              local smuggle = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
              try("cl 0", { body = smuggle, headers = { ["Content-Length"] = "0" } })
              try("cl less", { body = smuggle, headers = { ["content-length"] = 5 } })
              try("cl no body", { method = "PUT", headers = { ["Content-Length"] = "10" } })
              try("cl te", { body = "abc", headers = { ["Content-Length"] = "3",
                                                       ["Transfer-Encoding"] = "chunked" } })
              try("cl right", { body = "abc", headers = { ["Content-Length"] = "3" } })
              try("verify string", { verify = "false" })
              try("password", { url = "http://user:s3cret@127.0.0.1:1/x?a=b@c" })
              -- over libcurl's 1 MiB: "Out of memory", or "No URL set" past 8 MB
              try("url 2MB", { url = job.payload.rbase .. "/?" .. ("a"):rep(2000000) })
              try("url 9MB", { url = job.payload.rbase .. "/?" .. ("a"):rep(9000000) })
              try("header 2MB", { headers = { ["X-Big"] = ("v"):rep(2000000) } })
              try("header 900kB", { headers = { ["X-Big"] = ("v"):rep(900000) } })
              local hs = {}
              for i = 1, 70000 do hs["X-H" .. i] = "v" end
              try("70k headers", { headers = hs, timeout = 60 })
              -- the worker out of descriptors: the message says so
              local held, r, err = {}, nil, nil
              repeat
                local f = io.open("/dev/null")
                held[#held + 1] = f
              until f == nil
              r, err = jobrunner.http{ url = "http://127.0.0.1:1/", timeout = 20 }
              for _, f in ipairs(held) do f:close() end
              out(job, "no fd: " .. (r and "status " .. r.status or "nil, " .. err))
            end }]])
        local lines, dead = run_job(env, "req", { base = base, rbase = rbase }, 200)
        assert.falsy(dead, dead and dead.last_error)
        local want = {
          { "head", "^status 200$" },
          { "cl 0", "header 'Content%-Length' is not the body's length %(35 bytes%)$" },
          { "cl less", "header 'content%-length' is not the body's length %(35 bytes%)$" },
          { "cl no body", "header 'Content%-Length' is not the body's length %(0 bytes%)$" },
          { "cl te", "headers 'Content%-Length' and 'Transfer%-Encoding' together$" },
          { "cl right", "^status 200 body$" },
          { "verify string", "jobrunner%.http: 'verify' must be a boolean, got string$" },
          { "password", "^nil, jobrunner%.http: http://%*%*%*@127%.0%.0%.1:1/x%?a=b@c: " },
          { "url 2MB", "the url takes 200%d%d%d%d bytes, more than 1000000 a request may send$" },
          { "url 9MB", "the url takes 900%d%d%d%d bytes, more than 1000000 a request may send$" },
          { "header 2MB", "the url and headers take over 1000000 bytes" },
          { "header 900kB", "^status 200 body$" },
          { "70k headers", "^status 200 body$" },
          { "no fd", "^nil, jobrunner%.http: http://127%.0%.0%.1:1/: cannot open a socket: Too many open files$" },
        }
        assert.equal(#want, #lines, table.concat(lines, "\n"))
        local wrong = {}
        for i, w in ipairs(want) do
          local what, rest = lines[i]:match("^([^:]*): (.*)$")
          if what ~= w[1] or not rest:find(w[2]) then
            wrong[#wrong + 1] = "want " .. w[2] .. ", got " .. lines[i]:sub(1, 300)
          end
        end
        assert.equal("", table.concat(wrong, "\n"))
        assert.falsy(table.concat(lines, "\n"):find("s3cret", 1, true))
        local got = jr.read_file(rec) or ""
        assert.falsy(got:find("smuggled", 1, true), got:sub(1, 2000))
      end)
    end
  end)
end

-- io_spec.lua - I/O in handlers: jobs of a handler with inflight > 1 run at
-- once in one worker, each in a coroutine that waits on the worker's loop
-- (jobrunner.http, sleep, exec, all); every guarantee stays per job: a
-- timeout or a cancel ends one job and its requests and children, a
-- handler stuck in C is killed and blamed alone, limits and queue caps
-- count jobs. The local HTTP server is bench/slowhttp (build/bench/).
local jr = require "jr"

local slow_server = require("rawhttp").slow

local function get(url)
  return jr.sh("curl -s " .. url):match("%d+")
end

local function push_many(env, name, n, payload, opts)
  local q = assert(require("jobrunner").open(env.url, { schema = env.schema }))
  local batch = {}
  for i = 1, n do batch[i] = { name, payload and payload(i) or {}, opts } end
  assert(q:push_many(batch))
  q:close()
end

local GET = [[
local jobrunner = require "jobrunner"
return { inflight = 100, handle = function(job)
  local r, err = jobrunner.http{ url = job.payload.url }
  assert(r, err)
  assert(r.status == 200 and r.body == "ok\n", "got " .. tostring(r.status))
end }]]

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " I/O in handlers:", function()
    local env = jr.test_env(backend)

    it("runs 500 HTTP jobs 100 at a time in one worker", function()
      local base, stop = slow_server(300)
      finally(stop)
      env:config("concurrency = 1")
      env:script("get", GET)
      push_many(env, "get", 500, function() return { url = base .. "/x" } end)
      env:start()
      jr.wait_for(function() return env:count() == 0 end, 60)
      assert.is_true(tonumber(get(base .. "/peak")) >= 100)
      assert.equal("500", get(base .. "/count"))
      assert.equal(0, env:count("dead"))
    end)

    it("sleeps in coroutines and in a plain job", function()
      env:config("concurrency = 1")
      env:script("nap", [[
        local jobrunner = require "jobrunner"
        return { inflight = 20, handle = function(job)
          local t = jobrunner.now()
          jobrunner.sleep(0.5)
          assert(jobrunner.now() - t >= 0.45, "woke early")
          print("napped " .. job.id)
        end }]])
      env:script("plain", [[
        local jobrunner = require "jobrunner"
        return function(job)
          local t = jobrunner.now()
          jobrunner.sleep(0.2)
          print("plain slept " .. string.format("%.3f", jobrunner.now() - t))
        end]])
      push_many(env, "nap", 20)
      env:push("plain", "{}")
      local t0 = jr.now()
      env:start()
      jr.wait_for(function() return env:count() == 0 end, 30)
      -- 20 naps of 0.5 s in one worker: at once, not 10 s in a row
      assert.is_true(jr.now() - t0 < 6)
      -- the plain job slept its 0.2 s, not less (a loaded machine's
      -- sanitized build can print more: 0.3 once, so no upper bound)
      local slept = jr.wait_for(function()
        return env:log():match("plain slept (%d+%.%d+)")
      end)
      assert.is_true(tonumber(slept) >= 0.195, slept)
      local n = select(2, env:log():gsub("napped %d+", ""))
      assert.equal(20, n)
    end)

    it("runs a child with exec: output, status, stdin and env", function()
      env:config("concurrency = 1")
      env:script("ex", [[
        local jobrunner = require "jobrunner"
        return { inflight = 4, handle = function(job)
          local r = assert(jobrunner.exec({ "sh", "-c",
            'cat; echo "[$JR_X]"; echo oops >&2; exit 3' },
            { stdin = "in-" .. job.id .. "\n", env = { JR_X = "x" } }))
          assert(r.status == 3, "status " .. tostring(r.status))
          assert(r.stdout == "in-" .. job.id .. "\n[x]\n", r.stdout)
          assert(r.stderr == "oops\n", r.stderr)
          local nope, err = jobrunner.exec({ "/nonexistent/tool" })
          assert(nope == nil or nope.status == 127, "ran the nonexistent")
          print("exec ok " .. job.id)
        end }]])
      push_many(env, "ex", 4)
      env:start()
      jr.wait_for(function() return env:count() == 0 end, 30)
      assert.equal(4, select(2, env:log():gsub("exec ok %d+", "")))
      assert.equal(0, env:count("dead"))
    end)

    it("kills the child's process group on the exec timeout and on a cancel", function()
      env:config("concurrency = 1")
      env:script("kid", [[
        local jobrunner = require "jobrunner"
        return { inflight = 2, handle = function(job)
          local r, err = jobrunner.exec({ "sh", "-c",
            "sleep 60 & echo $! > " .. job.payload.file .. "; wait" },
            { timeout = job.payload.timeout })
          error(err or "finished")
        end }]])
      local a, b = env.dir .. "/a.pid", env.dir .. "/b.pid"
      env:push("kid", ('{"file":"%s","timeout":1}'):format(a))
      local id = env:push("kid", ('{"file":"%s","timeout":60}'):format(b))
      env:start()
      local pa = jr.wait_file(a, 10):match("%d+")
      local pb = jr.wait_file(b, 10):match("%d+")
      local function alive(pid) return os.execute("kill -0 " .. pid .. " 2>/dev/null") end
      -- the first: its exec's timeout kills the group, the job fails
      jr.wait_for(function() return not alive(pa) end, 10, "timed out child")
      jr.wait_for(function()
        local j = env:job(1)
        return j and (j.last_error or ""):find("timed out after 1", 1, true)
      end, 10)
      -- the second: cancelled, its grandchild dies with its group
      env:cli("cancel", tostring(math.tointeger(id) or id))
      jr.wait_for(function() return not alive(pb) end, 10, "cancelled child")
      jr.wait_for(function()
        local j = env:job(id)
        return j == nil or j.state == "cancelled"
      end, 10)
    end)

    it("waits in a plain handler (inflight 1): http, exec, its cancel", function()
      local base, stop = slow_server(100)
      finally(stop)
      env:config("concurrency = 1")
      env:script("plainio", [[
        local jobrunner = require "jobrunner"
        return function(job)
          local r = assert(jobrunner.http{ url = job.payload.url })
          assert(r.status == 200 and r.body == "ok\n")
          print("plain http " .. r.status)
          jobrunner.exec({ "sh", "-c", "sleep 60 & echo $! > " .. job.payload.file .. "; wait" })
          error("not cancelled")
        end]])
      local file = env.dir .. "/plain.pid"
      local id = env:push("plainio", ('{"url":"%s/x","file":"%s"}'):format(base, file))
      env:start()
      local pid = jr.wait_file(file, 10):match("%d+")
      env:cli("cancel", tostring(id))
      jr.wait_for(function() return not os.execute("kill -0 " .. pid .. " 2>/dev/null") end,
                  10, "the plain job's child")
      jr.wait_for(function()
        local j = env:job(id)
        return j == nil or j.state == "cancelled"
      end, 10)
      assert.truthy(env:log():find("plain http 200", 1, true))
    end)

    it("collects jobrunner.all's branches, a failing one reported", function()
      env:config("concurrency = 1")
      env:script("fan", [[
        local jobrunner = require "jobrunner"
        return { inflight = 2, handle = function(job)
          local t = jobrunner.now()
          local r = jobrunner.all{
            function() jobrunner.sleep(0.4); return "a", 1 end,
            function() jobrunner.sleep(0.4); error("branch b failed") end,
            function() jobrunner.sleep(0.4); return "c" end,
          }
          assert(jobrunner.now() - t < 1.0, "branches ran one after another")
          assert(r[1].ok and r[1][1] == "a" and r[1][2] == 1)
          assert(not r[2].ok and r[2].error:find("branch b failed", 1, true))
          assert(r[3].ok and r[3][1] == "c")
          print("fan ok")
        end }]])
      env:push("fan", "{}")
      env:start()
      jr.wait_for(function() return env:count() == 0 end, 20)
      assert.truthy(env:log():find("fan ok", 1, true))
      assert.equal(0, env:count("dead"))
    end)

    it("times out one coroutine while its 99 neighbours succeed", function()
      local base, stop = slow_server(1500)
      finally(stop)
      env:config("concurrency = 1, defaults = { max_retries = 0 }")
      env:script("slow", [[
        local jobrunner = require "jobrunner"
        return { inflight = 100, timeout = 5, handle = function(job)
          if job.payload.i == 1 then
            jobrunner.sleep(60)        -- past its timeout
          end
          local r = assert(jobrunner.http{ url = job.payload.url })
          assert(r.status == 200)
        end }]])
      push_many(env, "slow", 100, function(i) return { i = i, url = base .. "/x" } end)
      env:start()
      jr.wait_for(function() return env:count() <= 1 end, 30)
      local dead = env:jobs("state = 'dead'")
      jr.wait_for(function() return #env:jobs("state = 'dead'") == 1 end, 15)
      dead = env:jobs("state = 'dead'")
      assert.truthy(dead[1].last_error:find("timed out after 5s", 1, true))
      assert.equal("99", get(base .. "/count"))
    end)

    it("kills a worker stuck in C, blames that job alone", function()
      env:config("concurrency = 1, defaults = { max_retries = 0 }")
      env:script("mix", [[
        local jobrunner = require "jobrunner"
        return { inflight = 10, timeout = 2, handle = function(job)
          if job.payload.i == 1 then
            jobrunner.sleep(0.3)
            os.execute("sleep 30")     -- blocks the worker: no yield
          elseif job.payload.i == 2 then
            os.execute("sleep 0.5")    -- blocks, returns: named in the log
          elseif job.payload.i == 3 and not io.open(job.payload.file) then
            jobrunner.exec({ "sh", "-c", "sleep 60 & echo $! > " ..
                             job.payload.file .. "; wait" }, { timeout = 30 })
          else
            jobrunner.sleep(1)
          end
          print("mix done " .. job.payload.i)
        end }]])
      local file = env.dir .. "/kid3.pid"
      push_many(env, "mix", 10, function(i) return { i = i, file = file } end)
      env:start()
      local kid = jr.wait_file(file, 10):match("%d+")
      jr.wait_for(function() return env:count() <= 1 and env:count("dead") == 1 end, 40)
      -- the child a neighbour ran with exec, in a group of its own, died
      -- with the worker
      jr.wait_for(function() return not os.execute("kill -0 " .. kid .. " 2>/dev/null") end,
                  10, "the exec child of a job in the killed worker")
      local dead = env:jobs("state = 'dead'")
      assert.equal(1, #dead)
      assert.truthy(dead[1].payload:find('"i":%s*1[,}]'))
      assert.truthy(dead[1].last_error:find("worker killed", 1, true))
      jr.wait_for(function() return env:count() == 1 end, 30)
      -- the blocking call is named once, with its file and line
      assert.truthy(env:log():find("mix.lua:7: the handler ran over", 1, true))
    end)

    it("holds a queue cap with jobs as the unit", function()
      local base, stop = slow_server(200)
      finally(stop)
      env:config("concurrency = 1, queues = { capped = 5 }")
      env:script("get", GET)
      push_many(env, "get", 60, function() return { url = base .. "/x" } end,
                { queue = "capped" })
      env:start()
      jr.wait_for(function() return env:count() == 0 end, 60)
      assert.is_true(tonumber(get(base .. "/peak")) <= 5)
      assert.is_true(tonumber(get(base .. "/peak")) >= 3)
    end)

    it("holds a limit per key with jobs as the unit", function()
      local base, stop = slow_server(200)
      finally(stop)
      env:config("concurrency = 1, limits = { get = { per_key = { concurrency = 4 } } }")
      env:script("get", GET)
      push_many(env, "get", 40, function() return { url = base .. "/x" } end,
                { key = "acct-1" })
      env:start()
      jr.wait_for(function() return env:count() == 0 end, 60)
      assert.is_true(tonumber(get(base .. "/peak")) <= 4)
    end)

    it("keeps each coroutine job's context: push, progress, snooze, discard", function()
      env:config("concurrency = 1, retention = { completed = '1h' }")
      env:script("ctx", [[
        local jobrunner = require "jobrunner"
        return { inflight = 10, handle = function(job)
          local i = job.payload.i
          -- from a coroutine of the handler's own: still this job's
          coroutine.wrap(function() jobrunner.progress(i, 10, "job " .. i) end)()
          jobrunner.sleep(0.2 + 0.01 * (10 - i))   -- they end out of order
          if i == 3 then jobrunner.snooze(3600) end
          if i == 4 then
            jobrunner.push("ctx.never", { from = i })
            jobrunner.discard("four is out")
          end
          jobrunner.push("ctx.next", { from = i })
        end }]])
      env:script("ctx.next", "return function() end")
      push_many(env, "ctx", 10, function(i) return { i = i } end)
      env:start()
      jr.wait_for(function()
        return #env:jobs("name = 'ctx' AND state IN ('queued', 'running')") == 1 and
               env:count("dead") == 1
      end, 30)
      -- the snoozed one waits, the discarded one is dead without its push
      local snoozed = env:jobs("name = 'ctx' AND state = 'queued'")
      assert.equal(1, #snoozed)
      assert.truthy(snoozed[1].payload:find('"i":%s*3[,}]'))
      local dead = env:jobs("state = 'dead'")[1]
      assert.equal("four is out", dead.last_error)
      assert.equal(0, #env:jobs("name = 'ctx.never'"))
      -- the others pushed their own follow-up, once each, and kept their
      -- own progress
      jr.wait_for(function()
        return #env:jobs("name = 'ctx.next' AND state = 'completed'") == 8
      end, 20)
      assert.equal(8, #env:jobs("name = 'ctx' AND state = 'completed'"))
      local cjson = require "cjson"
      for _, i in ipairs({ 1, 5, 10 }) do
        local out = env:cli("show", tostring(i), "--json")
        local j = cjson.decode(out)
        assert.same({ done = i, total = 10, note = "job " .. i }, j.progress)
      end
    end)

    it("fails the job over the memory limit, the others rerun unblamed", function()
      env:config("memory_limit = 32, concurrency = 1")
      env:script("mem", [[
        local jobrunner = require "jobrunner"
        return { inflight = 10, max_retries = 0, handle = function(job)
          jobrunner.sleep(0.3)
          if job.payload.i == 1 then
            local t = {}
            for i = 1, 1e8 do t[i] = ("x"):rep(64) .. i end
          end
          jobrunner.sleep(0.5)
        end }]])
      push_many(env, "mem", 10, function(i) return { i = i } end)
      env:start()
      jr.wait_for(function() return env:count() == 1 end, 60)
      local dead = env:jobs("state = 'dead'")
      assert.equal(1, #dead)
      assert.truthy(dead[1].payload:find('"i":%s*1[,}]'))
      assert.equal("memory limit of 32 MiB exceeded", dead[1].last_error)
    end)

    it("verifies TLS unless given the CA", function()
      local dir = env.dir
      assert(os.execute(("openssl req -x509 -newkey rsa:2048 -nodes -keyout %s/k.pem " ..
        "-out %s/c.pem -days 1 -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1 " ..
        ">/dev/null 2>&1"):format(dir, dir)))
      -- a port of its own: busted seeds math.random with the second it
      -- started, so specs started together would draw the same numbers;
      -- and a port taken by something else is tried again with another
      local port, pid
      local seed = io.open("/dev/urandom", "rb")
      math.randomseed(string.unpack("I4", seed:read(4)))
      seed:close()
      for _ = 1, 5 do
        port = 20000 + math.random(0, 20000)
        pid = jr.sh(("openssl s_server -quiet -www -accept 127.0.0.1:%d -cert %s/c.pem " ..
          "-key %s/k.pem >/dev/null 2>&1 & echo $!"):format(port, dir, dir)):match("%d+")
        -- the server answers before the jobs run (a loaded machine starts
        -- it slowly: a job that met no server would end dead too)
        local up = pcall(jr.wait_for, function()
          return select(3, jr.sh(("curl -sk -m 2 -o /dev/null https://127.0.0.1:%d/")
            :format(port))) == 0
        end, 20, "the TLS server up")
        if up then break end
        os.execute("kill " .. pid .. " 2>/dev/null")
        pid = nil
      end
      assert(pid, "openssl s_server answered on none of 5 ports")
      finally(function() os.execute("kill " .. pid) end)
      env:config("concurrency = 1")
      env:script("tls", ([[
        local jobrunner = require "jobrunner"
        return { inflight = 2, handle = function(job)
          local r, err = jobrunner.http{ url = "https://127.0.0.1:%d/",
                                         cainfo = job.payload.ca }
          if not r then error(err) end
          print("tls status " .. r.status)
        end }]]):format(port))
      env:config("concurrency = 1, defaults = { max_retries = 0 }")
      env:push("tls", "{}")
      env:push("tls", ('{"ca":"%s/c.pem"}'):format(dir))
      env:start()
      jr.wait_for(function() return env:count() == 1 and env:count("dead") == 1 end, 20)
      local dead = env:jobs("state = 'dead'")[1]
      assert.truthy(dead.last_error:lower():find("certificate", 1, true))
      assert.truthy(env:log():find("tls status 200", 1, true))
    end)
  end)
end

-- http_push_spec.lua - POST /api/jobs (the token required; one job or an
-- array pushed all or none, errors naming the index and the field) and
-- the long poll GET /api/jobs/ID?wait=S (held until the job ends, or
-- answered as it stands at the end of the wait), on both backends.
local jr = require "jr"
local H = require "jrhttp"
local cjson = require "cjson"

-- Starts curl on url in the background; returns a handle whose read()
-- gives status, body and the seconds it took.
local function poll(url, secs)
  local out = os.tmpname()
  local cmd = ("(t0=$(date +%%s.%%N); curl -s -m %d -H %s -w '\\n%%{http_code}' %s > %s;" ..
    " echo \" $(echo \"$(date +%%s.%%N) - $t0\" | bc)\" >> %s) &"):format(secs + 10,
    jr.quote("Authorization: Bearer " .. H.TOKEN), jr.quote(url), out, out)
  os.execute(cmd)
  return {
    read = function()
      local text = jr.wait_for(function()
        local f = io.open(out)
        local s = f and f:read("a")
        if f then f:close() end
        return s and s:match("\n%d+ [%d.]+\n$") and s
      end, secs + 20, "long poll answer")
      os.remove(out)
      local body, code, took = text:match("^(.*)\n(%d+) ([%d.]+)\n$")
      return tonumber(code), body, tonumber(took)
    end,
  }
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " http push:", function()
    local env = jr.test_env(backend)

    it("pushes one job and many, only with the token, all or none", function()
      env:script("r", [[return { handle = function(job) return job.payload end }]])
      local base = H.start(env, 'result_ttl = "1h"')
      local url = base .. "/api/jobs"
      -- no token: refused, nothing pushed
      local code, body = H.req(url, { body = '{"name":"r"}' })
      assert.equal(401, code, body)
      code, body = H.req(url, { body = '{"name":"r"}', token = "wrong-token-0123456789" })
      assert.equal(401, code, body)
      assert.equal(0, env:count())
      -- one job, every option
      local one = H.json(url, 201, { body = cjson.encode({ name = "r", payload = { n = 1 },
        queue = "q1", priority = -3, max_retries = 2, delay = 3600, result_ttl = "2h",
        key = "k1" }) })
      assert.is_number(one.id)
      assert.equal("new", one.outcome)
      local job = H.json(base .. "/api/jobs/" .. math.tointeger(one.id))
      assert.equal("q1", job.queue)
      assert.equal(-3, job.priority)
      assert.equal(2, job.max_retries)
      assert.equal("queued", job.state)
      assert.same({ n = 1 }, cjson.decode(job.payload))
      assert.truthy(job.run_at - jr.now() > 3000)
      -- many in one transaction, with a unique key hit
      local many = H.json(url, 201, { body = cjson.encode({
        { name = "r", payload = { n = 2 }, unique_key = "u" },
        { name = "r", payload = { n = 3 }, unique_key = "u" },
        { name = "r", run_at = "2030-01-02T03:04:05Z" },
      }) })
      assert.equal(3, #many.ids)
      assert.same({ "new", "duplicate", "new" }, many.outcomes)
      assert.equal(many.ids[1], many.ids[2])
      assert.equal(3, env:count())
      -- a bad element refuses the whole array, naming index and field
      local bad = {
        { { { name = "r" }, { name = "r", priority = 1.5 } }, "jobs[1].priority: must be a whole number" },
        { { { name = "r" }, { payload = {} } }, "jobs[1]: 'name' is missing" },
        { { { name = "r" }, { name = "r", colour = 1 } }, "jobs[1]: unknown key 'colour'" },
        { { { name = "r" }, { name = "bad name" } }, "jobs[1]: " },
        { { { name = "r", payload = 5 } }, "jobs[0].payload: must be an object" },
        { { name = "r", on_conflict = "merge" }, "job.on_conflict: must be \"keep\", \"replace\" or \"cancel_running\"" },
        { { name = "r", delay = "soon" }, "job.delay: must be seconds or a duration" },
        { { name = "r", result_ttl = -5 }, "result_ttl -5 is out of range" },
      }
      for _, b in ipairs(bad) do
        code, body = H.req(url, { body = cjson.encode(b[1]), token = true })
        assert.equal(400, code, body)
        assert.matches(b[2], cjson.decode(body).error, 1, true)
      end
      code, body = H.req(url, { body = '[{"name":"r"}, {"name":', token = true })
      assert.equal(400, code)
      assert.matches("invalid JSON body at byte", body, 1, true)
      code, body = H.req(url, { body = '[]', token = true })
      assert.equal(400, code)
      assert.equal(3, env:count())   -- nothing of the refused arrays
      -- a GET of /api/jobs still lists
      local list = H.json(url)
      assert.equal(3, #list)
      assert.equal(0, env:stop())
    end)

    it("refuses a push on a server without a token", function()
      env:script("r", "return function() end")
      local base = H.start(env, nil, { token = false })
      local code, body = H.req(base .. "/api/jobs", { body = '{"name":"r"}' })
      assert.equal(403, code, body)
      assert.equal(0, env:count())
      assert.equal(0, env:stop())
    end)

    it("answers a parked long poll whose job another process ended, behind more polls than one read names", function()
      -- no handler for "held": this runner never ends those jobs, so only
      -- its looks at the parked polls' jobs can answer them
      local limit = io.popen("ulimit -n"):read("l")
      assert(limit == "unlimited" or tonumber(limit) >= 2400,
        "1,100 connections need ulimit -n of 2400 or more (spec/run raises it)")
      env:script("other", "return function() end")
      local n = 1100
      local base = H.start(env, nil, { http = "max_connections = 1500" })
      local hexport = ("%04X"):format(tonumber(base:match(":(%d+)$")))
      local ids = {}
      for from = 1, n + 1, 1000 do
        local jobs = {}
        for _ = from, math.min(from + 999, n + 1) do jobs[#jobs + 1] = { name = "held" } end
        for _, id in ipairs(H.json(base .. "/api/jobs", 201, { body = cjson.encode(jobs) }).ids) do
          ids[#ids + 1] = math.tointeger(id)
        end
      end
      local first = table.remove(ids, 1)
      local dir = os.tmpname()
      os.remove(dir)
      assert(os.execute("mkdir " .. dir))
      local function connected(count)
        jr.wait_for(function()
          local f, c = io.open("/proc/net/tcp"), 0
          for line in f:lines() do
            if line:match("^%s*%d+: %x+:" .. hexport .. " %x+:%x+ 01 ") then c = c + 1 end
          end
          f:close()
          return c >= count
        end, 60, "the long polls' connections")
        jr.sleep(2)             -- and their first look at the job made
      end
      -- curl holds at most 300 transfers at once: a curl per 275 polls
      local curls = 0
      local function polls(list)
        curls = curls + 1
        local cfg = assert(io.open(("%s/curl%d.cfg"):format(dir, curls), "w"))
        cfg:write(("header = %q\n"):format("Authorization: Bearer " .. H.TOKEN))
        for _, id in ipairs(list) do
          cfg:write(('url = "%s/api/jobs/%d?wait=120"\noutput = "%s/%d"\n'):format(base, id, dir, id))
        end
        cfg:close()
        os.execute(("(curl -s --no-progress-meter -m 130 -Z --parallel-immediate" ..
          " --parallel-max 300 -K %s/curl%d.cfg; touch %s/done%d) &"):format(dir, curls, dir, curls))
      end
      local function answered(from, to)
        return jr.wait_for(function()
          for i = from, to do
            local f = io.open(("%s/done%d"):format(dir, i))
            if not f then return false end
            f:close()
          end
          return true
        end, 60, "the long polls answered")
      end
      local function state(id)
        local f = assert(io.open(("%s/%d"):format(dir, id)))
        local job = cjson.decode(f:read("a"))
        f:close()
        return job.state
      end
      -- a poll parked first, then more than a read's worth after it
      polls({ first })
      connected(1)
      for from = 1, n, 275 do
        polls(table.move(ids, from, math.min(from + 274, n), 1, {}))
      end
      connected(n + 1)
      -- another process ends the first one's job: answered long before
      -- its wait of 120 s is over, though newer polls are parked
      env:cli("cancel", tostring(first))
      answered(1, 1)
      assert.equal("cancelled", state(first))
      -- and then all the others'
      local args = { "cancel" }
      for _, id in ipairs(ids) do args[#args + 1] = tostring(id) end
      env:cli(table.unpack(args))
      answered(2, curls)
      for _, id in ipairs(ids) do
        assert.equal("cancelled", state(id), "job " .. id)
      end
      os.execute("rm -rf " .. dir)
      assert.equal(0, env:stop())
    end)

    it("holds a long poll without a read each second, answered when another process ends its job", function()
      env:script("other", "return function() end")
      local base = H.start(env, 'log = { level = "debug" }')
      local id = env:push("held", "{}")     -- no handler: never ends here
      local p = poll(base .. "/api/jobs/" .. id .. "?wait=60", 60)
      local function looks()
        local n = 0
        for _ in env:log():gmatch("http: a look at the jobs of") do n = n + 1 end
        return n
      end
      jr.sleep(3)               -- parked, and the looks its own write woke
      local before = looks()
      jr.sleep(4)
      assert.equal(before, looks(), "looks while nothing ended")
      env:cli("cancel", tostring(id))
      local code, body = p.read()
      assert.equal(200, code, body)
      assert.equal("cancelled", cjson.decode(body).state)
      assert.truthy(looks() > before)
      assert.equal(0, env:stop())
    end)

    if backend == "postgres" then
      it("answers long polls while the watch on the ends of jobs is lost, and opens it again", function()
        env:script("other", "return function() end")
        local base = H.start(env, 'log = { level = "debug" }')
        local chan = env.schema .. "_finished"
        jr.wait_for(function()
          return #env:query(("SELECT pid FROM pg_stat_activity WHERE query = 'LISTEN \"%s\"'")
            :format(chan)) >= 1
        end, 10, "the watch's LISTEN")
        env:exec(("SELECT pg_terminate_backend(pid) FROM pg_stat_activity" ..
          " WHERE query = 'LISTEN \"%s\"'"):format(chan))
        local id = env:push("held", "{}")
        local p = poll(base .. "/api/jobs/" .. id .. "?wait=60", 60)
        jr.wait_for(function() return env:log():find("watch on the ends of jobs is lost") end,
          20, "the loss logged")
        env:cli("cancel", tostring(id))
        local code, body, took = p.read()
        assert.equal(200, code, body)
        assert.equal("cancelled", cjson.decode(body).state)
        assert.truthy(took < 30, took)
        -- opened again on the reads' thread, and looking only at ends
        jr.wait_for(function() return env:log():find("watch on the ends of jobs is back") end,
          30, "the watch back")
        id = env:push("held", "{}")
        p = poll(base .. "/api/jobs/" .. id .. "?wait=60", 60)
        jr.sleep(2)
        local function looks()
          local n = 0
          for _ in env:log():gmatch("http: a look at the jobs of") do n = n + 1 end
          return n
        end
        local before = looks()
        jr.sleep(3)
        assert.equal(before, looks(), "looks while nothing ended")
        env:cli("cancel", tostring(id))
        code, body = p.read()
        assert.equal("cancelled", cjson.decode(body).state)
        assert.equal(0, env:stop())
      end)
    end

    it("holds long polls until their jobs end, and answers a timeout as the job stands", function()
      env:script("slow", [[
        return { max_retries = 0, handle = function(job)
          local t = os.time() + job.payload.s
          while os.time() < t do end
          if job.payload.fail then error("boom") end
          return { n = job.payload.n }
        end }]])
      local base = H.start(env, "concurrency = 4")
      local a = env:push("slow", '{"s":2,"n":1}')
      local b = env:push("slow", '{"s":3,"n":2}')
      local d = env:push("slow", '{"s":2,"fail":true}')
      local long = env:push("slow", '{"s":30}')
      local pa = poll(base .. "/api/jobs/" .. a .. "?wait=60", 60)
      local pb = poll(base .. "/api/jobs/" .. b .. "?wait=60", 60)
      local pd = poll(base .. "/api/jobs/" .. d .. "?wait=60", 60)
      local pl = poll(base .. "/api/jobs/" .. long .. "?wait=2", 2)
      local code, body, took = pa.read()
      assert.equal(200, code, body)
      local ja = cjson.decode(body)
      assert.equal("completed", ja.state)
      assert.same({ n = 1 }, ja.result)
      assert.truthy(took < 15, took)
      code, body = pb.read()
      assert.equal(200, code)
      assert.same({ n = 2 }, cjson.decode(body).result)
      code, body = pd.read()
      assert.equal(200, code)
      local jd = cjson.decode(body)
      assert.equal("dead", jd.state)
      assert.equal(cjson.null, jd.result)
      code, body, took = pl.read()
      assert.equal(200, code)
      assert.equal("running", cjson.decode(body).state)
      assert.truthy(took >= 1.9 and took < 10, took)
      -- bad waits
      code, body = H.req(base .. "/api/jobs/" .. a .. "?wait=301", { token = true })
      assert.equal(400, code, body)
      assert.matches("wait must be seconds from 0 to 300", body, 1, true)
      code = H.req(base .. "/api/jobs/" .. a .. "?colour=1", { token = true })
      assert.equal(400, code)
      env:signal("KILL")
    end)
  end)
end

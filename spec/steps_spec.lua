-- steps_spec.lua - jobrunner.step and jobrunner.checkpoint, on both
-- engines: a step's value is recorded and a later attempt gets it back
-- without running the step again; a name used twice in an attempt, or
-- names in another order than the recorded ones, fail the attempt naming
-- the step call's file:line; a cursor resumes after a SIGTERM, the job
-- handed back without counting an attempt; a durable step survives a
-- kill -9 of its worker right after it returned (a default one runs
-- again); coroutine jobs (inflight = 50) with steps; show lists them.
local jr = require "jr"
local H = require "jrhttp"
local cjson = require "cjson"

local PID = [[
  local function pid()
    local f = assert(io.open("/proc/self/stat"))
    local p = f:read("*l"):match("^(%d+)")
    f:close()
    return p
  end
]]

local function show(env, id)
  local out, err, code = env:cli("show", tostring(id), "--json")
  assert(code == 0, err)
  return cjson.decode(out)
end

local function steps_of(env, id)
  local col = env.backend == "postgres" and "steps::text AS steps" or "steps"
  local s = env:query("SELECT " .. col .. " FROM jobs WHERE id = " .. id)[1].steps
  return s ~= nil and s ~= cjson.null and cjson.decode(s) or nil
end

local function count(lines, want)
  local n = 0
  for _, l in ipairs(lines) do n = n + (l == want and 1 or 0) end
  return n
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " steps:", function()
    local env = jr.test_env(backend)

    it("replays a step's value on the next attempt; a failed step runs again", function()
      env:script("s", jr.RECORD .. [[
        local jobrunner = require "jobrunner"
        return { max_retries = 3, backoff = 0, handle = function(job)
          local a = jobrunner.step("a", function()
            record("runs", "a " .. job.attempt)
            return { n = 1, s = "x" }
          end)
          local b = jobrunner.step("b", function()
            record("runs", "b " .. job.attempt)
            if job.attempt == 1 then error("boom") end
            return a.n + 1
          end)
          return { a = a, b = b }
        end }]])
      local id = env:push("s", "{}")
      env:start()
      env:wait_state(id, "completed", 30)
      assert.same({ "a 1", "b 1", "b 2" }, jr.lines(env.dir .. "/runs"))
      local j = show(env, id)
      assert.same({ a = { n = 1, s = "x" }, b = 2 }, j.result)
      assert.equal(2, tonumber(env:job(id).attempts))
      assert.equal(2, #j.steps)
      assert.equal("a", j.steps[1].name)
      assert.equal("done", j.steps[1].state)
      assert.same({ n = 1, s = "x" }, j.steps[1].value)
      assert.equal(1, j.steps[1].attempt)
      assert.equal("b", j.steps[2].name)
      assert.equal(2, j.steps[2].value)
      assert.equal(2, j.steps[2].attempt)
      assert.is_number(j.steps[2].duration)
      assert.truthy(j.steps[2].at:match("^%d%d%d%d%-%d%d%-%d%dT"), j.steps[2].at)
      -- the text form names them
      local out = env:cli("show", tostring(id))
      assert.truthy(out:find("steps:", 1, true), out)
      assert.truthy(out:match("a%s+recorded"), out)
      -- the Lua control module gives them decoded
      local q = jr.client(env)
      local t = assert(q:show(id))
      q:close()
      assert.equal(2, #t.steps)
      assert.equal("a", t.steps[1].name)
      assert.same({ n = 1, s = "x" }, t.steps[1].value)
      assert.equal(1, t.steps[1].attempt)
      assert.equal("b", t.steps[2].name)
      assert.equal(2, t.steps[2].value)
      assert.equal(2, t.steps[2].attempt)
      assert.is_number(t.steps[2].at)
      assert.is_number(t.steps[2].secs)
    end)

    it("fails an attempt that calls a name twice or in another order, naming file:line", function()
      local path = env:script("dup", [[
        local jobrunner = require "jobrunner"
        return { max_retries = 0, handle = function(job)
          jobrunner.step("one", function() return 1 end)
          jobrunner.step("one", function() return 2 end)
        end }]])
      env:script("order", [[
        local jobrunner = require "jobrunner"
        return { max_retries = 1, backoff = 0, handle = function(job)
          if job.attempt == 1 then
            jobrunner.step("x", function() return 1 end)
            error("again")
          end
          jobrunner.step("y", function() return 2 end)
        end }]])
      local d = env:push("dup", "{}")
      local o = env:push("order", "{}")
      env:start()
      local row = env:wait_state(d, "dead", 30)
      assert.truthy(row.last_error:find(path .. ":4: jobrunner.step: step 'one' is called twice", 1, true),
        row.last_error)
      row = env:wait_state(o, "dead", 30)
      assert.truthy(row.last_error:find("order.lua:7: jobrunner.step: step 'y' is step 1, where the " ..
        "job's records have 'x'", 1, true), row.last_error)
    end)

    for _, inflight in ipairs({ 1, 2 }) do
    it("resumes a cursor after SIGTERM without counting an attempt (inflight " .. inflight .. ")", function()
      env:config("shutdown_timeout = 20")
      env:script("rows", jr.RECORD .. [[
        local jobrunner = require "jobrunner"
        return { max_retries = 0, timeout = 120, inflight = ]] .. inflight .. [[, handle = function(job)
          return jobrunner.step("rows", function(cursor)
            local i = cursor or 0
            while i < 300 do
              i = i + 1
              record("rows", tostring(i))
              local t = jobrunner.now() + 0.01
              while jobrunner.now() < t do end
              jobrunner.checkpoint(i)
            end
            return i
          end)
        end }]])
      local id = env:push("rows", "{}")
      local p = env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/rows") >= 20 end, 30, "20 rows")
      env:stop("TERM", p, 30)
      local row = env:job(id)
      assert.equal("queued", row.state)
      assert.equal(0, tonumber(row.attempts))
      local st = steps_of(env, id)
      local done = #jr.lines(env.dir .. "/rows")
      assert.equal("rows", st[1].name)
      assert.equal(done, st[1].cursor)
      assert.is_nil(st[1].value)
      assert.truthy(done < 300, done)
      env:start()
      env:wait_state(id, "completed", 60)
      local lines = jr.lines(env.dir .. "/rows")
      assert.equal(300, #lines)
      for i, l in ipairs(lines) do assert.equal(tostring(i), l) end
      assert.equal(1, tonumber(env:job(id).attempts))
      assert.equal(300, show(env, id).result)
    end)
    end

    it("hands a cursor's job back at a reload, its attempt not counted", function()
      local src = jr.RECORD .. PID .. [[
        local jobrunner = require "jobrunner"
        return { max_retries = 0, timeout = 120, handle = function(job)
          return jobrunner.step("rows", function(cursor)
            local i = cursor or 0
            while i < 300 do
              i = i + 1
              record("rows", i .. " " .. pid())
              local t = jobrunner.now() + 0.01
              while jobrunner.now() < t do end
              jobrunner.checkpoint(i)
            end
            return i
          end)
        end }]]
      env:script("rows", src)
      local id = env:push("rows", "{}")
      local p = env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/rows") >= 20 end, 30, "20 rows")
      env:script("rows", src .. "-- a new generation\n")
      env:signal("HUP", p)
      env:wait_state(id, "completed", 60)
      local lines, pids, n = jr.lines(env.dir .. "/rows"), {}, 0
      assert.equal(300, #lines)
      for i, l in ipairs(lines) do
        local row, who = l:match("^(%d+) (%d+)$")
        assert.equal(tostring(i), row)
        if not pids[who] then pids[who], n = true, n + 1 end
      end
      assert.equal(2, n)       -- the old generation's worker, then a new one
      assert.equal(1, tonumber(env:job(id).attempts))
      -- handed back: the log says the job went back (not a failure)
      assert.is_nil(env:log(p):find("failed", 1, true), env:log(p))
    end)

    local ON = "defaults = { durable_steps = true }"
    for _, case in ipairs({ { "a durable step", true, "true", "nil" },
                            { "a step of a handler with durable_steps", true, "nil", "true" },
                            { "a default step", false, "nil", "nil" },
                            { "a step under defaults.durable_steps", true, "nil", "nil", ON },
                            { "a coroutine job's step under defaults.durable_steps", true,
                              "nil", "nil", ON, "inflight = 2," },
                            { "a step of a durable_steps = false handler under the default",
                              false, "nil", "false", ON },
                            { "a durable = false step under the default", false, "false",
                              "nil", ON } }) do
      local what, durable, opt, handler, config, extra = table.unpack(case)
      it((durable and "never runs " or "runs ") .. what .. (durable and " again" or " again") ..
         " after a kill -9 right after it returned", function()
        if config then env:config(config) end
        env:script("charge", jr.RECORD .. PID .. [[
          local jobrunner = require "jobrunner"
          return { max_retries = 2, backoff = 0, timeout = 60, ]] .. (extra or "") .. [[
                   durable_steps = ]] .. handler .. [[,
                   handle = function(job)
            local v = jobrunner.step("charge", function()
              record("charges", tostring(job.attempt))
              return "paid"
            end, { durable = ]] .. opt .. [[ })
            if job.attempt == 1 then
              record("pid", pid())
              while true do end
            end
            return v
          end }]])
        local id = env:push("charge", "{}")
        env:start()
        local pid = jr.wait_file(env.dir .. "/pid", 30):match("%d+")
        os.execute("kill -9 " .. pid)
        env:wait_state(id, "completed", 60)
        local charges = jr.lines(env.dir .. "/charges")
        if durable then
          assert.same({ "1" }, charges)
        else
          -- its list waits for company 2 ms, and the kill comes within
          -- them unless the machine is slow: run again, or (slow) not
          assert.is_true(#charges == 2 or #charges == 1, #charges)
          assert.equal("1", charges[1])
        end
        assert.equal("paid", show(env, id).result)
      end)
    end

    it("hands the jobs of a killed coroutine worker on with their steps: none runs again", function()
      env:config("concurrency = 1")
      env:script("held", jr.RECORD .. PID .. [[
        local jobrunner = require "jobrunner"
        return { inflight = 5, max_retries = 3, backoff = 0, timeout = 60, handle = function(job)
          local v = jobrunner.step("a", function()
            record("held", "a " .. job.id)
            return job.id
          end, { durable = job.id % 2 == 0 })
          if not io.open(os.getenv("PWD") .. "/killed") then
            record("pids", pid())
            jobrunner.sleep(60)
          end
          return v
        end }]])
      local ids = {}
      for i = 1, 5 do ids[i] = env:push("held", "{}") end
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/pids") == 5 end, 30, "5 in flight")
      -- the default steps' records went with their lists (2 ms at most)
      jr.wait_for(function()
        local n = 0
        for _, id in ipairs(ids) do n = n + (steps_of(env, id) and 1 or 0) end
        return n == 5
      end, 30, "5 lists recorded")
      jr.write_file(env.dir .. "/killed", "")
      os.execute("kill -9 " .. jr.lines(env.dir .. "/pids")[1])
      for _, id in ipairs(ids) do env:wait_state(id, "completed", 60) end
      local lines = jr.lines(env.dir .. "/held")
      for _, id in ipairs(ids) do assert.equal(1, count(lines, "a " .. id), "a " .. id) end
    end)

    it("runs steps in coroutine jobs (inflight = 50), durable ones too", function()
      env:config("concurrency = 2")
      env:script("co", jr.RECORD .. [[
        local jobrunner = require "jobrunner"
        return { inflight = 50, max_retries = 2, backoff = 0, handle = function(job)
          local a = jobrunner.step("a", function()
            record("co", "a " .. job.id)
            jobrunner.sleep(0.05)
            return job.id
          end)
          local b = jobrunner.step("b", function()
            record("co", "b " .. job.id)
            return a * 2
          end, { durable = true })
          if job.attempt == 1 and job.id % 3 == 0 then error("again") end
          local c = jobrunner.step("c", function()
            jobrunner.sleep(0.01)
            record("co", "c " .. job.id)
            return b + 1
          end)
          return c
        end }]])
      local ids = {}
      for i = 1, 100 do ids[i] = env:push("co", "{}") end
      env:start()
      for _, id in ipairs(ids) do env:wait_state(id, "completed", 60) end
      local lines = jr.lines(env.dir .. "/co")
      for _, id in ipairs(ids) do
        assert.equal(1, count(lines, "a " .. id), "a " .. id)
        assert.equal(1, count(lines, "b " .. id), "b " .. id)
        assert.equal(1, count(lines, "c " .. id), "c " .. id)
        assert.equal(id * 2 + 1, show(env, id).result)
      end
    end)

    it("reruns a finished job from a step: only the later steps run again", function()
      env:script("three", jr.RECORD .. [[
        local jobrunner = require "jobrunner"
        return { max_retries = 0, handle = function(job)
          local out = {}
          for _, n in ipairs({ "a", "b", "c" }) do
            out[#out + 1] = jobrunner.step(n, function()
              record("three", n .. " " .. job.payload.v)
              if job.payload.die == n then error("stop at " .. n) end
              return n .. job.payload.v
            end)
          end
          return table.concat(out, ",")
        end }]])
      env:script("busy", [[
        return { timeout = 60, handle = function(job)
          local t = os.time() + 30
          while os.time() < t do end
        end }]])
      local id = env:push("three", '{"v": 1}')
      local dead = env:push("three", '{"v": 1, "die": "c"}')
      env:start()
      env:wait_state(id, "completed", 30)
      env:wait_state(dead, "dead", 30)
      assert.equal("a1,b1,c1", show(env, id).result)
      -- from b with a new payload: a replays, b and c run with it
      local out, err, code = env:cli("rerun", tostring(id), "--from-step", "b",
        "--payload", '{"v": 2}')
      assert.equal(0, code, err)
      assert.equal(id .. " queued from step 'b'\n", out)
      jr.wait_for(function()
        local j = show(env, id)
        return j.state == "completed" and j.result == "a1,b2,c2"
      end, 30, "rerun completed")
      -- the dead one from b, its payload as it was: a replays, b runs, c
      -- fails again
      out, err, code = env:cli("rerun", tostring(dead), "--from-step", "b")
      assert.equal(0, code, err)
      jr.wait_for(function()
        return #jr.lines(env.dir .. "/three") == 10
      end, 30, "the dead job's c again")
      env:wait_state(dead, "dead", 30)
      local lines = jr.lines(env.dir .. "/three")
      assert.equal(2, count(lines, "a 1"))           -- once a job
      assert.equal(3, count(lines, "b 1"))           -- id once, dead twice
      assert.equal(3, count(lines, "c 1"))
      assert.equal(1, count(lines, "b 2"))
      assert.equal(1, count(lines, "c 2"))
      -- a step never recorded (c, which raised) is no place to start from
      out, err, code = env:cli("rerun", tostring(dead), "--from-step", "c")
      assert.equal(2, code)
      assert.truthy(err:find("job " .. dead .. ": no step 'c' recorded", 1, true), err)
      -- no such step, a running job, no such job: refused, nothing changed
      out, err, code = env:cli("rerun", tostring(id), "--from-step", "zz")
      assert.equal(2, code)
      assert.truthy(err:find("job " .. id .. ": no step 'zz' recorded", 1, true), err)
      local busy = env:push("busy", "{}")
      env:wait_state(busy, "running", 30)
      out, err, code = env:cli("rerun", tostring(busy))
      assert.equal(2, code)
      assert.truthy(err:find("job " .. busy .. " is running", 1, true), err)
      out, err, code = env:cli("rerun", "999999")
      assert.equal(5, code)
      assert.equal("completed", show(env, id).state)
    end)

    it("lists steps in GET /api/jobs/ID and reruns from POST /api/jobs/ID/rerun", function()
      env:script("two", jr.RECORD .. [[
        local jobrunner = require "jobrunner"
        return { max_retries = 0, handle = function(job)
          local a = jobrunner.step("a", function()
            record("two", "a " .. job.payload.v)
            return job.payload.v
          end)
          return jobrunner.step("b", function()
            record("two", "b " .. job.payload.v)
            return a + job.payload.v
          end)
        end }]])
      local base = H.start(env)
      local id = env:push("two", '{"v": 1}')
      env:wait_state(id, "completed", 30)
      local j = H.json(base .. "/api/jobs/" .. id, 200)
      assert.equal(2, #j.steps)
      assert.equal("a", j.steps[1].name)
      assert.equal("done", j.steps[1].state)
      assert.equal(1, j.steps[1].value)
      assert.equal(1, j.steps[2].attempt)
      local r = H.json(base .. "/api/jobs/" .. id .. "/rerun?from_step=b", 200,
        { method = "POST", body = '{"v": 5}' })
      assert.same({ id = id, state = "queued" }, r)
      jr.wait_for(function()
        local k = H.json(base .. "/api/jobs/" .. id, 200)
        return k.state == "completed" and k.result == 6
      end, 30, "rerun over HTTP")
      assert.same({ "a 1", "b 1", "b 5" }, jr.lines(env.dir .. "/two"))
      -- /metrics: the records sent (a, b, then b again; a replayed is none)
      local code, text = H.req(base .. "/metrics", { token = true })
      assert.equal(200, code)
      assert.equal("3", text:match("\njobrunner_steps_recorded_total (%d+)\n"), text)
      -- refused: no such step, bad payload, no token, no such job
      local body
      code, body = H.req(base .. "/api/jobs/" .. id .. "/rerun?from_step=zz",
        { method = "POST", token = true })
      assert.equal(400, code)
      assert.truthy(body:find("no step 'zz' recorded", 1, true), body)
      code, body = H.req(base .. "/api/jobs/" .. id .. "/rerun", { body = "{x", token = true })
      assert.equal(400, code)
      assert.truthy(body:find("invalid JSON payload", 1, true), body)
      code = H.req(base .. "/api/jobs/" .. id .. "/rerun", { method = "POST" })
      assert.equal(401, code)
      code = H.req(base .. "/api/jobs/999999/rerun", { method = "POST", token = true })
      assert.equal(404, code)
      assert.equal("completed", env:job(id).state)
    end)

    it("refuses a durable_steps that is not true or false, naming the file", function()
      local path = env:script("bad", "return { durable_steps = 1, handle = function() end }\n")
      local out, err, code = env:cli("check")
      assert.equal(3, code)
      assert.truthy((out .. err):find(path .. ": 'durable_steps' must be true or false", 1, true), out .. err)
    end)

    it("refuses a defaults.durable_steps that is not true or false, naming the key and the file", function()
      env:config("defaults = { durable_steps = 1 }")
      env:script("plain", "return function(job) return 1 end")
      local out, err, code = env:cli("check")
      assert.are_not.equal(0, code)
      local msg = out .. err
      assert.truthy(msg:find(env.config_file, 1, true), msg)
      assert.truthy(msg:find("defaults.durable_steps", 1, true), msg)
      assert.truthy(msg:find("must be true or false", 1, true), msg)
    end)

    it("leaves handlers without steps as they were: no steps recorded", function()
      env:script("plain", "return function(job) return 1 end")
      local id = env:push("plain", "{}")
      env:start()
      env:wait_state(id, "completed", 30)
      assert.is_nil(steps_of(env, id))
      assert.equal(cjson.null, show(env, id).steps)
      local q = jr.client(env)
      assert.is_nil(assert(q:show(id)).steps)
      q:close()
    end)
  end)
end

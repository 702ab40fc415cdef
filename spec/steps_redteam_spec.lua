-- steps_redteam_spec.lua - jobrunner.step and jobrunner.checkpoint used
-- as careless and hostile handlers do, on both engines: a step whose
-- error a pcall catches ends there (the steps after it run, and the
-- next attempt runs it again, the ones after it replaying).
local jr = require "jr"
local cjson = require "cjson"

local function show(env, id)
  local out, err, code = env:cli("show", tostring(id), "--json")
  assert(code == 0, err)
  return cjson.decode(out)
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " steps red team:", function()
    local env = jr.test_env(backend)

    for _, inflight in ipairs({ 1, 2 }) do
    it("ends a step whose error a pcall caught: the next steps run, the next attempt runs it again (inflight " ..
       inflight .. ")", function()
      env:script("caught", jr.RECORD .. [[
        local jobrunner = require "jobrunner"
        return { max_retries = 1, backoff = 0, inflight = ]] .. inflight .. [[, handle = function(job)
          local ok, err = pcall(jobrunner.step, "x", function(cursor)
            record("runs", "x " .. job.attempt .. " " .. tostring(cursor))
            if job.attempt == 1 then error("flaky") end
            return "ok" .. job.attempt
          end)
          local y = jobrunner.step("y", function()
            record("runs", "y " .. job.attempt)
            return job.attempt
          end)
          if job.attempt == 1 then
            record("err", tostring(err))
            error("again")
          end
          return { x = ok and err, y = y }
        end }]])
      local id = env:push("caught", "{}")
      env:start()
      env:wait_state(id, "completed", 30)
      assert.same({ "x 1 nil", "y 1", "x 2 nil" }, jr.lines(env.dir .. "/runs"))
      assert.truthy(jr.read_file(env.dir .. "/err"):find("flaky", 1, true))
      local j = show(env, id)
      assert.same({ x = "ok2", y = 1 }, j.result)
      assert.equal(2, #j.steps)
      assert.equal("x", j.steps[1].name)
      assert.equal("ok2", j.steps[1].value)
      assert.equal("y", j.steps[2].name)
      assert.equal(1, j.steps[2].value)
    end)
    end

    it("keeps a step's cursor through an attempt that fails before its next checkpoint", function()
      env:script("cur", jr.RECORD .. [[
        local jobrunner = require "jobrunner"
        return { max_retries = 2, backoff = 0, handle = function(job)
          return jobrunner.step("rows", function(cursor)
            record("runs", job.attempt .. " " .. tostring(cursor))
            if job.attempt == 1 then jobrunner.checkpoint(5) end
            if job.attempt < 3 then error("flaky") end
            return cursor
          end)
        end }]])
      local id = env:push("cur", "{}")
      env:start()
      env:wait_state(id, "completed", 30)
      assert.same({ "1 nil", "2 5", "3 5" }, jr.lines(env.dir .. "/runs"))
      assert.equal(5, show(env, id).result)
    end)

    it("names the handler's file:line for a bad name, function, options, value or nesting", function()
      local path = env:script("bad", [[
        local jobrunner = require "jobrunner"
        local cases = {
          name = function() jobrunner.step({}, function() end) end,
          empty = function() jobrunner.step("", function() end) end,
          long = function() jobrunner.step(("a"):rep(200), function() end) end,
          ctl = function() jobrunner.step("a\0b", function() end) end,
          fn = function() jobrunner.step("f", 5) end,
          opts = function() jobrunner.step("o", function() end, 5) end,
          value = function() jobrunner.step("v", function() return function() end end) end,
          nest = function() jobrunner.step("n", function() jobrunner.step("m", function() end) end) end,
        }
        return { max_retries = 0, handle = function(job)
          cases[job.payload.k]()
          return "ran"
        end }]])
      local want = {
        name = { 3, "jobrunner.step: its name (argument 1) is table, not a string" },
        empty = { 4, "jobrunner.step: empty step name" },
        long = { 5, "jobrunner.step: invalid step name" },
        ctl = { 6, "jobrunner.step: invalid step name" },
        fn = { 7, "jobrunner.step: step 'f': its function (argument 2) is number" },
        opts = { 8, "jobrunner.step: step 'o': its options (argument 3) are number, not a table" },
        value = { 9, "jobrunner.step: step 'v': its value: result: cannot encode a function" },
        nest = { 10, "jobrunner.step: step 'm' inside step 'n' (steps do not nest)" },
      }
      local ids = {}
      for k in pairs(want) do ids[k] = env:push("bad", cjson.encode({ k = k })) end
      -- a number is a name (its text), as Lua makes it one
      env:script("num", [[
        local jobrunner = require "jobrunner"
        return function(job) return jobrunner.step(7, function() return "seven" end) end]])
      local num = env:push("num", "{}")
      env:start()
      for k, w in pairs(want) do
        local row = env:wait_state(ids[k], "dead", 30)
        local head = path .. ":" .. w[1] .. ": " .. w[2]
        assert.equal(head, row.last_error:sub(1, #head), k)
      end
      env:wait_state(num, "completed", 30)
      assert.equal("7", show(env, num).steps[1].name)
    end)

    it("commits a durable step's record at once on an idle runner", function()
      env:script("dur", [[
        local jobrunner = require "jobrunner"
        return { max_retries = 0, timeout = 120, handle = function(job)
          for i = 1, 40 do jobrunner.step("s" .. i, function() return i end, { durable = true }) end
          return 40
        end }]])
      local id = env:push("dur", "{}")
      env:start()
      env:wait_state(id, "completed", 90)
      -- each waited up to a second for the runner's tick (about 20 s in
      -- all); at once, 40 commits take well under a second
      local col = env.backend == "postgres" and "steps::text AS steps" or "steps"
      local st = cjson.decode(env:query("SELECT " .. col .. " FROM jobs WHERE id = " .. id)[1].steps)
      assert.equal(40, #st)
      local secs = st[40].at - st[1].at
      assert.truthy(secs < 10, "40 durable steps took " .. tostring(secs) .. " s")
    end)

    it("names a hand-back a pcall caught as one, and still hands the job back", function()
      env:config("shutdown_timeout = 20")
      env:script("rows", jr.RECORD .. [[
        local jobrunner = require "jobrunner"
        return { max_retries = 0, timeout = 120, handle = function(job)
          return jobrunner.step("rows", function(cursor)
            local i = cursor or 0
            while i < 300 do
              i = i + 1
              local ok, err = pcall(function()
                record("rows", tostring(i))
                local t = jobrunner.now() + 0.01
                while jobrunner.now() < t do end
                jobrunner.checkpoint(i)
              end)
              if not ok then record("caught", tostring(err)) end
            end
            return i
          end)
        end }]])
      local id = env:push("rows", "{}")
      local p = env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/rows") >= 20 end, 30, "20 rows")
      env:stop("TERM", p, 30)
      local caught = jr.lines(env.dir .. "/caught")
      assert.truthy(#caught >= 1)
      assert.equal("jobrunner.checkpoint: handed back at a checkpoint", caught[1])
      local row = env:job(id)
      assert.equal("queued", row.state)
      assert.equal(0, tonumber(row.attempts))
    end)

    it("fails the step that would take the job's records past 16 MiB, naming it", function()
      env:config("max_result = 8388608")
      env:script("huge", [[
        local jobrunner = require "jobrunner"
        return { max_retries = 0, handle = function(job)
          for i = 1, 4 do
            jobrunner.step("s" .. i, function() return ("x"):rep(6 * 1024 * 1024) end)
          end
        end }]])
      local id = env:push("huge", "{}")
      env:start()
      env:wait_state(id, "dead", 60)
      local j = show(env, id)
      assert.truthy(j.last_error:find("step 's3'", 1, true), j.last_error)
      assert.truthy(j.last_error:find("JR_STEPS_MAX", 1, true), j.last_error)
      assert.equal(2, #j.steps)
    end)
  end)
end

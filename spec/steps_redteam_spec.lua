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
  end)
end

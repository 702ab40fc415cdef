-- attempts_spec.lua - every failed attempt of a job is recorded, on each
-- backend (docs/operations.md, "Attempt history"): a job failing 4 times
-- then succeeding shows its 4 attempts with their errors, times, runner,
-- worker and generation in `show --json`, `show`, GET /api/jobs/ID, the
-- Lua control module and SQL (the job_attempts view); the list keeps the
-- newest 20; a timeout (a failure the runner decides) and a lease lost
-- with its runner are attempts too; a job that never failed has no log;
-- retention and dead purge remove the history with its job.
local jr = require "jr"
local H = require "jrhttp"
local cjson = require "cjson"

-- Fails its first `fails` attempts (payload), then succeeds.
local FLAKY = [[
return function(job)
  if job.attempt <= job.payload.fails then
    error("boom " .. job.attempt, 0)
  end
end
]]

-- The first line of an error (a handler's error has a traceback after).
local function first(e)
  return type(e) == "string" and e:match("^[^\n]*") or e
end

local function show_json(env, id)
  local out, err, code = env:cli("show", tostring(id), "--json")
  assert.equal(0, code, err)
  return cjson.decode(out)
end

local function view_rows(env, id)
  return env:query(("SELECT n, attempt, error, runner, worker, generation" ..
    " FROM job_attempts WHERE job_id = %d ORDER BY n"):format(id))
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": attempt history", function()
    local env = jr.test_env(backend)

    it("a job failing 4 times then succeeding shows its 4 attempts everywhere", function()
      env:script("flaky", FLAKY)
      local base = H.start(env, 'retention = { completed = "1h" },' ..
        " defaults = { backoff = 0, max_retries = 10 }")
      local id = env:push("flaky", '{"fails": 4}')
      jr.wait_for(function()
        local j = show_json(env, id)
        return j.state == "completed"
      end, 30, "completed")
      local j = show_json(env, id)
      assert.equal(5, j.attempt)
      assert.equal(4, #j.attempts)
      for i, a in ipairs(j.attempts) do
        assert.equal(i, a.attempt)
        assert.equal("boom " .. i, first(a.error))
        assert.matches("^%d%d%d%d%-%d%d%-%d%dT", a.at)  -- as the other times
        assert.is_true(a.duration >= 0 and a.duration < 10)
        assert.matches("^.+:%d+:%x+$", a.runner)
        assert.is_true(a.worker >= 1)
        assert.equal(j.generation, a.generation)
      end
      assert.is_true(j.attempts[1].at <= j.attempts[4].at)
      -- the text form
      local out = env:cli("show", tostring(id))
      assert.matches("attempts", out)
      assert.matches("#4 .- boom 4", out)
      -- the API: epoch seconds, as its other times
      local api = H.json(base .. "/api/jobs/" .. id)
      assert.equal(5, api.attempt)
      assert.equal(4, #api.attempts)
      assert.equal("boom 3", first(api.attempts[3].error))
      assert.equal(j.attempts[3].runner, api.attempts[3].runner)
      assert.is_number(api.attempts[3].at)
      assert.is_true(math.abs(api.attempts[3].at - api.finished_at) < 30)
      -- SQL
      local rows = view_rows(env, id)
      assert.equal(4, #rows)
      for i, r in ipairs(rows) do
        assert.equal(i, r.n)
        assert.equal(i, r.attempt)
        assert.equal("boom " .. i, first(r.error))
        assert.equal(j.attempts[i].runner, r.runner)
      end
      -- the Lua control module
      local q = jr.client(env)
      local t = assert(q:show(id))
      assert.equal(4, #t.attempts)
      assert.equal("boom 2", first(t.attempts[2].error))
      assert.equal(2, t.attempts[2].attempt)
      assert.is_number(t.attempts[2].at)
      assert.equal(j.attempts[2].worker, t.attempts[2].worker)
      q:close()
      env:stop()
    end)

    it("keeps the newest 20 failed attempts", function()
      env:script("flaky", FLAKY)
      env:config("defaults = { backoff = 0, max_retries = 24 }")
      env:start()
      local id = env:push("flaky", '{"fails": 100}')
      env:wait_state(id, "dead", 60)
      local j = show_json(env, id)
      assert.equal(25, j.attempt)
      assert.equal(20, #j.attempts)
      assert.equal(6, j.attempts[1].attempt)
      assert.equal("boom 6", first(j.attempts[1].error))
      assert.equal(25, j.attempts[20].attempt)
      assert.equal("boom 25", first(j.attempts[20].error))
      assert.equal(20, #view_rows(env, id))
      -- dead purge removes the job and its history
      local _, err, code = env:cli("dead", "purge")
      assert.equal(0, code, err)
      assert.equal(0, #view_rows(env, id))
      env:stop()
    end)

    it("records a timeout, a worker's death blamed on the job, not the plain successes", function()
      env:script("slow", [[
        return { timeout = 0.3, handle = function(job)
          if job.attempt == 1 then while true do end end
        end }]])
      env:script("crash", [[
        return function(job)
          if job.attempt == 1 then os.execute("kill -9 $PPID") end
        end]])
      env:script("ok", "return function() end")
      env:config('retention = { completed = "1h" }, defaults = { backoff = 0 }')
      env:start()
      local id = env:push("slow", "{}")
      local crash = env:push("crash", "{}")
      local ok = env:push("ok", "{}")
      jr.wait_for(function() return show_json(env, id).state == "completed" end,
        30, "slow completed")
      jr.wait_for(function() return show_json(env, ok).state == "completed" end,
        30, "ok completed")
      local j = show_json(env, id)
      assert.equal(1, #j.attempts)
      assert.matches("timed out", j.attempts[1].error)
      assert.is_true(j.attempts[1].duration >= 0.25)
      assert.is_true(j.attempts[1].worker >= 1)
      jr.wait_for(function() return show_json(env, crash).state == "completed" end,
        30, "crash completed")
      local c = show_json(env, crash).attempts
      assert.equal(1, #c)
      assert.matches("worker died %(signal 9%)", c[1].error)
      assert.is_true(c[1].worker >= 1)
      assert.is_number(c[1].duration)
      assert.same({}, show_json(env, ok).attempts)
      local raw = env:query("SELECT attempt_log FROM jobs WHERE id = " .. ok)
      assert.equal(cjson.null, raw[1].attempt_log)
      env:stop()
    end)

    it("records a lease lost with its runner, naming that runner", function()
      env:script("ok", "return function() end")
      env:config('retention = { completed = "1h" }')
      local id = env:push("ok", "{}")
      local past = jr.past_later(env)
      env:exec(("UPDATE jobs SET state = 'running', attempts = 1," ..
        " locked_by = 'ghost:42:abcdef', locked_until = %s, started_at = %s" ..
        " WHERE id = %d"):format(past, past, id))
      env:start()
      jr.wait_for(function() return show_json(env, id).state == "completed" end,
        30, "completed after the rescue")
      local j = show_json(env, id)
      assert.equal(1, #j.attempts)
      local a = j.attempts[1]
      assert.equal("lease expired: runner lost", a.error)
      assert.equal("ghost:42:abcdef", a.runner)
      assert.equal(1, a.attempt)
      assert.equal(cjson.null, a.worker)
      assert.is_true(a.duration > 3000)   -- claimed an hour before its loss
      env:stop()
    end)

    it("retention prunes the history with its job", function()
      env:script("flaky", FLAKY)
      env:config('retention = { completed = "2s" }, defaults = { backoff = 0 }')
      env:start()
      local id = env:push("flaky", '{"fails": 2}')
      jr.wait_for(function() return #view_rows(env, id) == 2 end, 30,
        "two attempts recorded")
      jr.wait_for(function() return env:count() == 0 end, 30, "pruned")
      assert.equal(0, #view_rows(env, id))
      assert.equal(0, #env:query("SELECT * FROM job_attempts"))
      env:stop()
    end)
  end)
end

-- coroutines_spec.lua - Lua coroutines in handlers and in jobrunner.lua:
-- one made while a file loads runs later under the limit of what resumes
-- it (a handler's job, a hook), never the finished load's; a coroutine a
-- handler makes in a job that runs with others (inflight > 1) is that
-- job's: its waits (jobrunner.sleep) wait on the worker's loop, and the
-- job's timeout and cancel end it, and that job alone; those jobs see
-- job.parents and job.batch as plain ones do; a wait that outlives the
-- job's timeout ends it as a timeout ("timed out after 2s", retried as
-- any other), also in a plain job; an option error of jobrunner.http
-- names the option.
local jr = require "jr"

-- The lines of a file (none if it is missing).
local function lines(path)
  local out, f = {}, io.open(path)
  if not f then return out end
  for l in f:lines() do out[#out + 1] = l end
  f:close()
  return out
end

-- No job left to run: queued, waiting or running.
local function settled(env)
  return #env:jobs("state IN ('queued', 'waiting', 'running')") == 0
end

local KEEP = "retention = { completed = '1h' }, "

local function count(path, line)
  local n = 0
  for _, l in ipairs(lines(path)) do
    if l == line then n = n + 1 end
  end
  return n
end

-- A handler that appends "start I" and "end I" to job.payload.file around
-- its body, which is its own coroutine doing job.payload.what.
local OWN = [[
local jobrunner = require "jobrunner"
local function note(job, what)
  local f = assert(io.open(job.payload.file, "a"))
  f:write(what, " ", job.payload.i, "\n")
  f:close()
end
return { inflight = 4, timeout = %s, max_retries = 0, handle = function(job)
  note(job, "start")
  local what = job.payload.what
  if what == "sleep" then
    coroutine.wrap(function() jobrunner.sleep(60) end)()
  elseif what == "loop" then
    jobrunner.sleep(0.3)
    coroutine.wrap(function() while true do end end)()
  elseif what == "nested" then
    -- a wait two coroutines deep, its values passed back up
    local co = coroutine.create(function(a)
      local inner = coroutine.wrap(function(b)
        jobrunner.sleep(0.2)
        local r = jobrunner.all{ function() jobrunner.sleep(0.1); return b end }
        coroutine.yield(r[1][1] + 1)
        return "done"
      end)
      local v = inner(a)
      assert(inner() == "done")
      return v
    end)
    local ok, v = coroutine.resume(co, 41)
    assert(ok and v == 42, "got " .. tostring(v))
    assert(coroutine.status(co) == "dead")
    -- a wait whose resumer cannot yield (in table.sort's comparator)
    -- raises, and leaves nothing behind to wake the job later
    local ok2, err = pcall(coroutine.wrap(function()
      table.sort({ 2, 1 }, function(x, y)
        coroutine.wrap(function() jobrunner.sleep(0.1) end)()
        return x < y
      end)
    end))
    assert(not ok2 and err:find("cannot wait here", 1, true), tostring(err))
    local t0 = jobrunner.now()
    jobrunner.sleep(1)
    assert(jobrunner.now() - t0 >= 0.9, "woken early")
  else
    jobrunner.sleep(1.5)
  end
  note(job, "end")
end }]]

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " coroutines:", function()
    local env = jr.test_env(backend)

    it("runs handlers whose coroutine was made while their file loaded", function()
      env:config(KEEP .. "concurrency = 2")
      local src = [[
        local jobrunner = require "jobrunner"
        local n = 0
        local next_n = coroutine.wrap(function()
          while true do
            for _ = 1, 30000 do end     -- past the count hook's step
            n = n + 1
            coroutine.yield(n)
          end
        end)
        return { inflight = %d, handle = function(job)
          local f = assert(io.open(job.payload.file, "a"))
          f:write(job.name, " ", next_n(), "\n")
          f:close()
        end }]]
      env:script("gen1", src:format(1))
      env:script("gen4", src:format(4))
      local file = env.dir .. "/gen.out"
      for _ = 1, 5 do
        env:push("gen1", ('{"file":"%s"}'):format(file))
        env:push("gen4", ('{"file":"%s"}'):format(file))
      end
      env:start()
      jr.wait_for(function() return settled(env) end, 30)
      assert.equal(10, #env:jobs("state = 'completed'"))
      assert.equal(10, #lines(file))
      assert.is_nil(env:log():find("worker died", 1, true))
    end)

    it("runs hooks that resume a coroutine jobrunner.lua made while loading", function()
      env:config(KEEP .. [[hooks = (function()
          local co = coroutine.wrap(function(spin)
            while true do
              for _ = 1, 30000 do end   -- past the count hook's step
              while spin do end         -- the hook's budget ends it
              local f = assert(io.open(os.getenv("PWD") .. "/hooked", "a"))
              f:write("hook\n")
              f:close()
              spin = coroutine.yield()
            end
          end)
          return { on_job_success = function() co(false) end,
                   on_job_dead = function() co(true) end }
        end)()]])
      env:script("ok", "return function() end")
      env:script("bad", "return { max_retries = 0, handle = function() error('bad') end }")
      for _ = 1, 5 do env:push("ok", "{}") end
      env:start()
      jr.wait_for(function() return #lines(env.dir .. "/hooked") == 5 end, 20,
                  "five hooks")
      assert.is_nil(env:log():find("hook on_job_success failed", 1, true))
      env:push("bad", "{}")
      jr.wait_for(function()
        return env:log():find("hook on_job_dead failed", 1, true)
      end, 30, "the spinning hook interrupted")
      assert.truthy(env:log():find("interrupted: ran more than", 1, true))
      env:push("ok", "{}")
      jr.wait_for(function()
        return #env:jobs("name = 'ok' AND state = 'completed'") == 6
      end, 20)
      assert.is_true(env:alive())
    end)

    it("ends one job whose own coroutine waits or loops past its timeout, the others once", function()
      env:config(KEEP .. "concurrency = 1")
      -- the loop holds the worker up to its job's timeout: its
      -- neighbours, still in flight then, have a longer one
      env:script("own", OWN:format(2))
      env:script("ownok", OWN:format(30))
      local file = env.dir .. "/own.out"
      local whats = { "sleep", "loop", "nested", "plain" }
      local ids = {}
      for i, what in ipairs(whats) do
        ids[i] = env:push(i <= 2 and "own" or "ownok",
                          ('{"file":"%s","i":%d,"what":"%s"}'):format(file, i, what))
      end
      env:start()
      jr.wait_for(function() return settled(env) end, 40)
      -- the wait by the job's timer, the loop by the count hook (with
      -- the line it was at)
      local j = env:job(ids[1])
      assert.equal("dead", j.state)
      assert.equal("timed out after 2s", j.last_error)
      j = env:job(ids[2])
      assert.equal("dead", j.state)
      assert.truthy(j.last_error:find("timed out after 2s", 1, true), j.last_error)
      for i = 3, 4 do
        local j = env:job(ids[i])
        assert.equal("completed", j.state, j.last_error)
        assert.equal(1, count(file, "start " .. i))
        assert.equal(1, count(file, "end " .. i))
      end
      assert.equal(1, count(file, "start 1"))
      assert.equal(1, count(file, "start 2"))
      assert.is_nil(env:log():find("worker killed", 1, true))
    end)

    it("cancels one job whose own coroutine waits, the others run once", function()
      env:config(KEEP .. "concurrency = 1")
      env:script("own", OWN:format(60))
      local file = env.dir .. "/own.out"
      local id = env:push("own", ('{"file":"%s","i":1,"what":"sleep"}'):format(file))
      for i = 2, 4 do
        env:push("own", ('{"file":"%s","i":%d,"what":"plain"}'):format(file, i))
      end
      env:start()
      jr.wait_for(function() return count(file, "start 4") == 1 end, 20)
      env:cli("cancel", tostring(id))
      jr.wait_for(function() return settled(env) end, 30)
      local j = env:job(id)
      assert.is_true(j == nil or j.state == "cancelled")
      for i = 2, 4 do
        assert.equal(1, count(file, "start " .. i))
        assert.equal(1, count(file, "end " .. i))
      end
      assert.equal(0, count(file, "end 1"))
    end)

    it("gives job.parents and job.batch to a handler with inflight = 2", function()
      env:config(KEEP .. "concurrency = 1")
      local file = env.dir .. "/fl.out"
      env:script("fl", ([[
        local jobrunner = require "jobrunner"
        return { inflight = 2, handle = function(job)
          jobrunner.sleep(0.1)
          local ps = {}
          for id, p in pairs(job.parents or {}) do
            ps[#ps + 1] = math.tointeger(id) .. ":" .. p.state .. ":" ..
                          tostring(p.result)
          end
          local f = assert(io.open(%q, "a"))
          f:write(job.payload.n, " batch=", tostring(job.batch),
                  " parents=", table.concat(ps, ","), "\n")
          f:close()
          return job.payload.n
        end }]]):format(file))
      env:script("cb", "return function() end")
      local q = jr.client(env)
      local ids, batch = q:flow({ jobs = {
        { ref = "a", name = "fl", payload = { n = "a" } },
        { ref = "b", name = "fl", payload = { n = "b" }, after = { "a" } } },
        batch = { on_complete = "cb" } })
      q:close()
      env:start()
      jr.wait_for(function() return #lines(file) == 2 end, 20)
      local got = lines(file)
      local b = math.tointeger(batch) or batch
      assert.equal(("a batch=%d parents="):format(b), got[1])
      assert.equal(("b batch=%d parents=%d:completed:a"):format(b,
                   math.tointeger(ids.a) or ids.a), got[2])
    end)

    it("times a wait out as the job's timeout, retried, plain and at once", function()
      env:config(KEEP .. "concurrency = 1")
      env:script("nap1", [[
        local jobrunner = require "jobrunner"
        return { timeout = 2, max_retries = 1, backoff = 0, handle = function(job)
          if job.payload.caught then
            local ok, err = pcall(jobrunner.sleep, 1e9)
            error("went on after: " .. tostring(err))
          end
          jobrunner.sleep(10)
        end }]])
      env:script("nap2", [[
        local jobrunner = require "jobrunner"
        return { inflight = 2, timeout = 2, max_retries = 1, backoff = 0,
                 handle = function(job) jobrunner.sleep(1e9) end }]])
      local a = env:push("nap1", "{}")
      local b = env:push("nap1", '{"caught":true}')
      local c = env:push("nap2", "{}")
      env:start()
      jr.wait_for(function() return env:count("dead") == 3 end, 60)
      for _, id in ipairs({ a, b, c }) do
        local j = env:job(id)
        assert.equal("timed out after 2s", j.last_error)
        assert.equal(2, math.tointeger(j.attempts))
      end
    end)

    it("names the option in jobrunner.http's option error", function()
      env:config(KEEP .. "concurrency = 1")
      env:script("badopt", [[
        local jobrunner = require "jobrunner"
        return { max_retries = 0, handle = function(job)
          jobrunner.http{ url = "http://127.0.0.1:1/", timeout = -1 }
        end }]])
      local id = env:push("badopt", "{}")
      env:start()
      jr.wait_for(function() return env:count("dead") == 1 end, 20)
      local err = env:job(id).last_error
      assert.truthy(err:find("jobrunner.http: 'timeout' must be a " ..
                             "number from 0.001 to 86400.0", 1, true), err)
    end)
  end)
end

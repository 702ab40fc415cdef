-- co_redteam_spec.lua - misuse of coroutines in handlers that run many
-- jobs at once (inflight > 1): a job's own coroutine (coroutine.running()
-- kept in a global) resumed or closed by another job or by its own
-- jobrunner.all branch, and a coroutine of the handler's that waits
-- (jobrunner.sleep) for one job resumed by another, are refused; the job
-- that waits runs once, sleeps in full and completes. A resume of no
-- thread names the handler's line.
local jr = require "jr"

local KEEP = "retention = { completed = '1h', dead = '1h' }, "

local function count(env, file, line)
  local n = 0
  for _, l in ipairs(jr.lines(file)) do
    if l == line then n = n + 1 end
  end
  return n
end

local function settled(env)
  return #env:jobs("state IN ('queued', 'waiting', 'running')") == 0
end

-- Each job appends "ROLE start", what it saw, and "ROLE end" to the file.
local HEAD = [[
local jobrunner = require "jobrunner"
local function note(job, ...)
  local f = assert(io.open(job.payload.file, "a"))
  f:write(job.payload.role, " ", table.concat({ ... }, " "), "\n")
  f:close()
end
return { inflight = 4, timeout = 30, max_retries = 1, backoff = 0,
         handle = function(job)
  note(job, "start")
  %s
  note(job, "end")
end }]]

local STEAL = [[
  if job.payload.role == "a" then
    MINE = coroutine.running()
    local t0 = jobrunner.now()
    jobrunner.sleep(2)
    note(job, "slept", tostring(jobrunner.now() - t0 >= 1.9))
  elseif job.payload.role == "b" then
    jobrunner.sleep(0.5)
    local ok, e = coroutine.resume(MINE, "x")
    note(job, "resume", tostring(ok), tostring(e))
    ok, e = pcall(coroutine.close, MINE)
    note(job, "close", tostring(ok), tostring(e))
    ok, e = pcall(function() local r = coroutine.resume(nil); return r end)
    note(job, "nil", tostring(ok), tostring(e))
  else
    local me = coroutine.running()
    local r = jobrunner.all{ function()
      jobrunner.sleep(0.1)
      return coroutine.resume(me, "hijack")
    end }
    note(job, "branch", tostring(r[1][1]), tostring(r[1][2]))
  end]]

local SHARED = [[
  if job.payload.role == "a" then
    SH = coroutine.create(function()
      local t0 = jobrunner.now()
      jobrunner.sleep(2)
      return jobrunner.now() - t0 >= 1.9
    end)
    note(job, "slept", tostring(select(2, coroutine.resume(SH))))
  else
    jobrunner.sleep(0.5)
    local ok, e = coroutine.resume(SH, "x")
    note(job, "resume", tostring(ok), tostring(e))
    ok, e = pcall(coroutine.close, SH)
    note(job, "close", tostring(ok), tostring(e))
  end]]

-- Lua's own coroutine.resume, reached through the debug library: the
-- wait it starts is passed on by nothing, and the job's next wait must
-- not be woken by it.
local RAW = [[
  local raw
  for i = 1, 10 do
    local n, v = debug.getupvalue(coroutine.resume, i)
    if n == nil then break end
    for k = 1, 10 do
      local n2, v2 = debug.getupvalue(type(v) == "function" and v or print, k)
      if n2 == "resume" then raw = v2 end
    end
  end
  local co = coroutine.create(function() jobrunner.sleep(0.3) end)
  note(job, "raw", tostring(raw ~= nil), tostring(select(2, raw(co)) ~= nil))
  local t0 = jobrunner.now()
  jobrunner.sleep(1)
  note(job, "slept", tostring(jobrunner.now() - t0 >= 0.9))]]

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " coroutines misused:", function()
    local env = jr.test_env(backend)

    local function run(src, roles)
      env:config(KEEP .. "concurrency = 1")
      env:script("h", HEAD:format(src))
      local file = env.dir .. "/out"
      local ids = {}
      for _, role in ipairs(roles) do
        ids[role] = env:push("h", ('{"file":"%s","role":"%s"}'):format(file, role))
      end
      env:start()
      jr.wait_for(function() return settled(env) end, 60)
      return file, ids
    end

    it("refuses to resume or close a job's own coroutine", function()
      local file, ids = run(STEAL, { "a", "b", "c" })
      for _, role in ipairs({ "a", "b", "c" }) do
        local j = env:job(ids[role])
        assert.equal("completed", j.state, tostring(j.last_error))
        assert.equal(1, math.tointeger(j.attempts))
        assert.equal(1, count(env, file, role .. " start"))
        assert.equal(1, count(env, file, role .. " end"))
      end
      assert.equal(1, count(env, file, "a slept true"))
      assert.equal(1, count(env, file,
        "b resume false cannot resume a job's own coroutine"))
      local close
      for _, l in ipairs(jr.lines(file)) do
        close = close or l:match("^b close (.*)")
      end
      assert.truthy(close and close:find("^false .*cannot close a job's own coroutine"),
                    tostring(close))
      assert.equal(1, count(env, file,
        "c branch false cannot resume a job's own coroutine"))
      -- no thread: blamed on the handler's line, as Lua's own resume does
      local bad
      for _, l in ipairs(jr.lines(file)) do bad = bad or l:match("^b nil (.*)") end
      assert.truthy(bad and bad:find("^false [^ ]*/h%.lua:%d+: bad argument #1 " ..
                    "to 'resume' %(coroutine expected%)$"), tostring(bad))
    end)

    it("refuses to resume or close a coroutine that waits for another job", function()
      local file, ids = run(SHARED, { "a", "b" })
      for _, role in ipairs({ "a", "b" }) do
        local j = env:job(ids[role])
        assert.equal("completed", j.state, tostring(j.last_error))
        assert.equal(1, math.tointeger(j.attempts))
      end
      assert.equal(1, count(env, file, "a slept true"))
      assert.equal(1, count(env, file, "b resume false cannot resume a " ..
        "coroutine while it waits (jobrunner.sleep, http, exec or all)"))
      local close
      for _, l in ipairs(jr.lines(file)) do
        close = close or l:match("^b close (.*)")
      end
      assert.truthy(close and close:find("^false .*cannot close a coroutine while it waits"),
                    tostring(close))
    end)

    it("drops a wait that Lua's own resume left behind at the job's next wait", function()
      local file, ids = run(RAW, { "a" })
      assert.equal("completed", env:job(ids.a).state)
      assert.equal(1, count(env, file, "a raw true true"))
      assert.equal(1, count(env, file, "a slept true"))
    end)
  end)
end

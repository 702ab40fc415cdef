-- hooks_spec.lua - lifecycle hooks in the config, run in the master: each
-- event with its documented fields; a hook that raises or loops is logged
-- and never stops jobs; the config's backoff(job, attempt, err).
local jr = require "jr"
local cjson = require "cjson"

-- Config source recording every event as a JSON line in $PWD/events.
local RECORD_ALL = [[
  hooks = (function()
    local cjson = require "cjson"
    local function rec(e)
      local f = assert(io.open(os.getenv("PWD") .. "/events", "a"))
      f:write(cjson.encode(e), "\n")
      f:close()
    end
    local t = {}
    for _, n in ipairs({ "on_start", "on_stop", "on_reload", "on_job_start",
        "on_job_success", "on_job_retry", "on_job_dead", "on_scale", "on_tick" }) do
      t[n] = rec
    end
    return t
  end)(),
  tick_interval = 0.2, concurrency = { min = 1, max = 2 }, idle_timeout = 1]]

local function events(env, kind)
  local out = {}
  local f = io.open(env.dir .. "/events")
  if not f then return out end
  for l in f:lines() do
    local e = cjson.decode(l)
    if not kind or e.event == kind then out[#out + 1] = e end
  end
  f:close()
  return out
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " hooks:", function()
    local env = jr.test_env(backend)

    it("fires every hook with its documented fields", function()
      env:config(RECORD_ALL)
      env:script("ok", "return function() end")
      env:script("retry", "return { max_retries = 1, backoff = 0, handle = function() error('again') end }")
      env:start()
      local ok = env:push("ok")
      local rid = env:push("retry")
      jr.wait_for(function() return #events(env, "job_dead") == 1 end)
      env:script("ok", "return function() return 1 end")
      jr.wait_for(function() return #events(env, "reload") == 1 end)
      jr.wait_for(function() return #events(env, "tick") >= 2 end)
      assert.equal(0, env:stop())

      local s = events(env, "start")[1]
      assert.equal(env.proc.pid, s.pid)
      assert.is_string(s.backend)
      assert.is_string(s.scripts)
      assert.equal(1, s.min)
      assert.equal(2, s.max)

      local starts = events(env, "job_start")
      assert.is_true(#starts >= 3)
      local st = starts[1]
      assert.equal(ok, st.id)
      assert.equal("ok", st.name)
      assert.equal(1, st.attempt)
      assert.equal("default", st.queue)
      assert.equal(0, st.priority)
      assert.is_number(st.worker)
      assert.is_number(st.waited)

      local succ = events(env, "job_success")[1]
      assert.equal(ok, succ.id)
      assert.equal("ok", succ.name)
      assert.is_number(succ.duration)

      local retry = events(env, "job_retry")[1]
      assert.equal(rid, retry.id)
      assert.equal(1, retry.attempt)
      assert.matches("again", retry.error)
      assert.is_number(retry.run_at)
      assert.equal(0, retry.delay)

      local dead = events(env, "job_dead")[1]
      assert.equal(rid, dead.id)
      assert.equal(2, dead.attempt)
      assert.matches("again", dead.error)

      local reload = events(env, "reload")[1]
      assert.is_true(reload.ok)
      assert.matches("^%x+$", reload.generation)

      local tick = events(env, "tick")[1]
      assert.is_table(tick.workers)
      assert.is_number(tick.workers.busy)
      assert.is_number(tick.workers.idle)
      assert.is_number(tick.workers.total)
      assert.is_number(tick.backlog)
      assert.is_number(tick.jobs_per_s)
      assert.is_number(tick.failure_rate)
      assert.is_table(tick.latency)

      local stop = events(env, "stop")[1]
      assert.equal(1, stop.done)
      assert.equal(1, stop.dead)
    end)

    it("reports a failed reload to on_reload with the error", function()
      env:config(RECORD_ALL)
      env:script("ok", "return function() end")
      env:start()
      env:script("ok", "return function(\n")
      local e = jr.wait_for(function() return events(env, "reload")[1] end)
      assert.is_false(e.ok)
      assert.matches("ok.lua:", e.error)
    end)

    it("logs a raising hook with its traceback and keeps running jobs", function()
      env:config([[hooks = { on_job_start = function(e) error("hook broke " .. e.id) end }]])
      env:script("ok", "return function() end")
      env:start()
      for _ = 1, 5 do env:push("ok") end
      jr.wait_for(function() return env:count() == 0 end)
      local log = env:log()
      assert.matches("hook on_job_start failed", log)
      assert.matches("hook broke", log)
      assert.matches("traceback", log)
      assert.is_true(env:alive())
    end)

    it("interrupts a looping hook and keeps running jobs", function()
      env:config([[hooks = { on_job_success = function() while true do end end }]])
      env:script("ok", "return function() end")
      env:start()
      for _ = 1, 3 do env:push("ok") end
      jr.wait_for(function() return env:count() == 0 end, 60)
      assert.matches("interrupted", env:log())
      assert.equal(0, env:stop())
    end)

    it("refuses an unknown hook name, naming it", function()
      env:config([[hooks = { on_jobstart = function() end }]])
      local _, err, code = env:cli("check")
      assert.equal(3, code)
      assert.matches("hooks.on_jobstart", err)
    end)

    it("uses the config's backoff(job, attempt, err) for handlers without one", function()
      env:config([[backoff = function(job, attempt, err)
        assert(job.name == "f" and attempt == 1 and err:find("x"))
        return 1234 end]])
      env:script("f", "return function() error('x') end")
      env:start()
      local id = env:push("f")
      local row = jr.wait_for(function()
        local r = env:job(id)
        return r and r.state == "queued" and r.attempts == 1 and r
      end)
      assert.is_true(math.abs((row.run_at - row.db_now) - 1234) < 10)
    end)
  end)
end

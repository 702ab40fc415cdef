-- pool_spec.lua - the master's workers on both backends: a worker that
-- cannot be started (spawns retried, the local queue given back), the
-- kill deadline of the job in the handler (not of one prefetched behind
-- it), cancels of prefetched jobs whose worker died, and the blame after a
-- cancel. Jobs are sent to a worker several at once (prefetch) when its
-- jobs are quick: each test warms the worker up with quick jobs first, then
-- pushes its jobs while the queue is paused, so one claim brings them all.
local jr = require "jr"

-- Pushes while the queue is paused: the runner claims them in one go.
-- list holds {name, payload}; returns the ids in that order.
local function batch(env, list)
  local _, err, code = env:cli("queue", "pause", "default")
  assert.equal(0, code, err)
  local ids = {}
  for i, j in ipairs(list) do ids[i] = env:push(j[1], j[2]) end
  _, err, code = env:cli("queue", "resume", "default")
  assert.equal(0, code, err)
  return ids
end

-- n quick jobs of handler name (payload {"warm":true}), run to the end.
local function warm_up(env, name, n)
  local list = {}
  for i = 1, n do list[i] = { name, '{"warm":true}' } end
  batch(env, list)
  jr.wait_for(function() return env:idle() end, 30, "warm-up")
end

local function count_named(env, name)
  return env:query("SELECT count(*) AS n FROM jobs WHERE name = '" .. name ..
    "'")[1].n
end

-- The runner's process: the env's pid is the shell's or the binary's.
local function runner_pid(env)
  local pid = env.proc.pid
  local comm = jr.read_file("/proc/" .. pid .. "/comm") or ""
  if comm:match("^jobrunner") then return pid end
  local out = jr.sh("pgrep -P " .. pid .. " -x jobrunner")
  return assert(tonumber(out:match("%d+")), "no runner process")
end

local function nofile(pid, soft)
  local _, err, code = jr.sh(("prlimit --pid %d --nofile=%s:"):format(pid,
    soft))
  assert.equal(0, code, err)
end

local function count_lines(text, s)
  local n, at = 0, 1
  while true do
    local i = text:find(s, at, true)
    if not i then return n end
    n, at = n + 1, i + 1
  end
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " pool:", function()
    local env = jr.test_env(backend)

    it("retries a worker that cannot be started, giving its jobs back meanwhile",
      function()
      env:config("concurrency = 1, lease = 2")
      env:script("quick", "return function() end")
      env:script("gate", jr.RECORD .. [[
        return { max_retries = 0, handle = function(job)
          if job.payload.warm then return end
          record("gate", io.open("/proc/self/stat"):read("n"))
          while true do os.execute("sleep 0.1") end
        end }]])
      env:start()
      warm_up(env, "quick", 200)
      local list = { { "gate", "{}" } }
      for i = 2, 21 do list[i] = { "quick", "{}" } end
      batch(env, list)
      local worker = tonumber(jr.wait_file(env.dir .. "/gate"):match("%d+"))
      -- the runner can open no descriptor: its next worker cannot start
      local pid = runner_pid(env)
      nofile(pid, 3)
      os.execute("kill -9 " .. worker)
      jr.wait_for(function()
        return env:log():find("cannot start a worker", 1, true)
      end, 20, "a spawn failure logged")
      -- none runs here: after a lease the jobs it held are queued again,
      -- for another runner, and none is claimed again
      jr.wait_for(function()
        local rows = env:jobs("name = 'quick'")
        for _, r in ipairs(rows) do
          if r.state ~= "queued" then return false end
        end
        return #rows == 20
      end, 30, "the quick jobs given back")
      assert.matches("given back to the queue", env:log(), 1, true)
      nofile(pid, 1024)
      jr.wait_for(function() return count_named(env, "quick") == 0 end, 30,
        "the quick jobs run once a worker starts")
      local log = env:log()
      assert.equal(1, count_lines(log, "cannot start a worker"), log)
      assert.matches("started after %d+ failed attempt", log)
      assert.equal(0, env:stop())
    end)

    it("kills a job stuck in C at its own timeout, not at a prefetched job's",
      function()
      env:config("concurrency = 1")
      env:script("quick", "return function() end")
      env:script("stuck", jr.RECORD .. [[
        return { timeout = 1, max_retries = 0, handle = function(job)
          record("stuck", job.id)
          os.execute("sleep 120")
        end }]])
      env:start()
      warm_up(env, "quick", 100)
      local ids = batch(env, { { "stuck", "{}" }, { "quick", "{}" },
                               { "quick", "{}" }, { "quick", "{}" } })
      jr.wait_file(env.dir .. "/stuck")
      local row = env:wait_state(ids[1], "dead", 40)
      assert.matches("timed out after 1s", row.last_error, 1, true)
      -- the quick jobs behind it were not blamed: they ran on a new worker
      jr.wait_for(function() return count_named(env, "quick") == 0 end, 20,
        "the prefetched jobs run")
      assert.equal(0, env:stop())
    end)

    it("keeps a cancel told to a worker that died before starting the job",
      function()
      env:config("concurrency = 1")
      env:script("hold", jr.RECORD .. [[
        return { max_retries = 0, handle = function(job)
          if job.payload.warm then return end
          record("hold", job.id)
          local dir = os.getenv("PWD")
          while not io.open(dir .. "/die") do os.execute("sleep 0.1") end
          os.execute("kill -9 " .. io.open("/proc/self/stat"):read("n"))
          os.execute("sleep 10")
        end }]])
      env:script("victim", jr.RECORD .. [[
        return function(job)
          if job.payload.warm then return end
          record("victim", job.id)
        end]])
      env:start()
      -- the victim goes to the worker with hold only when the warm-up's
      -- jobs took under a millisecond each as the master saw them (two
      -- no-op jobs to the worker at once): on a loaded machine they may
      -- not, and the cancel finds the victim in the runner's own queue.
      -- Then hold is let go and the whole is tried again.
      local ids, told
      for try = 1, 3 do
        warm_up(env, "victim", 100)
        ids = batch(env, { { "hold", "{}" }, { "victim", "{}" } })
        jr.wait_for(function() return #jr.lines(env.dir .. "/hold") == try end,
          20, "hold starts")
        local _, err, code = env:cli("cancel", tostring(ids[2]))
        assert.equal(0, code, err)
        told = pcall(jr.wait_for, function()
          return env:log():find(("job %d (victim): cancel requested; telling"):
            format(ids[2]), 1, true)
        end, 10)
        if told or try == 3 then break end
        env:wait_state(ids[2], "cancelled", 20)
        jr.write_file(env.dir .. "/die", "")
        jr.wait_for(function()
          local r = env:job(ids[1])
          return r == nil or r.state ~= "running"
        end, 30, "hold ends")
        os.remove(env.dir .. "/die")
      end
      assert.is_true(told, "the worker told (three tries)")
      jr.write_file(env.dir .. "/die", "")
      jr.wait_for(function()
        local r = env:job(ids[2])
        return r == nil or r.state == "cancelled"
      end, 30, "the victim ends")
      assert.same({}, jr.lines(env.dir .. "/victim"))
      assert.equal("cancelled", env:job(ids[2]).state)
      assert.equal(0, env:stop())
    end)

    it("blames no other job for a cancelled one that ended in its worker",
      function()
      -- the cancelled job is prefetched behind a running one and ends at
      -- once when its turn comes ("cancelled before it started"), its result
      -- waiting in the worker while the next job runs, stuck in C
      env:config("concurrency = 1")
      env:script("hold", jr.RECORD .. [[
        return function(job)
          record("hold", job.id)
          local dir = os.getenv("PWD")
          while not io.open(dir .. "/go") do os.execute("sleep 0.1") end
        end]])
      env:script("victim", "return function() end")
      env:script("nap", jr.RECORD .. [[
        return { max_retries = 0, handle = function(job)
          if job.payload.warm then return end
          record("nap", job.id)
          os.execute("sleep 10")
        end }]])
      env:start()
      warm_up(env, "nap", 100)
      local ids = batch(env, { { "hold", "{}" }, { "victim", "{}" },
                               { "nap", "{}" } })
      jr.wait_file(env.dir .. "/hold")
      local _, err, code = env:cli("cancel", tostring(ids[2]))
      assert.equal(0, code, err)
      jr.wait_for(function()
        return env:log():find(("job %d (victim): cancel requested; telling"):
          format(ids[2]), 1, true)
      end, 20, "the worker told")
      jr.sleep(6)     -- past the cancel's grace period: set-up, not a check
      jr.write_file(env.dir .. "/go", "")
      local row = jr.wait_for(function()
        local r = env:job(ids[3])
        return r == nil and {} or r.state == "dead" and r
      end, 60, "nap ends")
      assert.is_nil(row.last_error)
      assert.equal(1, #jr.lines(env.dir .. "/nap"))
      assert.equal("cancelled", env:wait_state(ids[2], "cancelled", 20).state)
      assert.equal(0, env:stop())
    end)
  end)
end

-- signals_spec.lua - shutdown and crashes on each backend: SIGTERM drains,
-- a second signal stops at once, kill -9 of the runner is rescued by the
-- lease, and a large backlog or a batch of failing jobs ends as it should.
local jr = require "jr"

local RECORD = jr.RECORD

local lines = jr.lines

local function counts(list)
  local c = {}
  for _, v in ipairs(list) do c[v] = (c[v] or 0) + 1 end
  return c
end

-- ids as file keys: rows decode ids as floats, the CLI prints integers
local function key(id) return ("%d"):format(id) end

local function pid_alive(pid)
  local stat = jr.read_file("/proc/" .. pid .. "/stat")
  return stat ~= nil and not stat:match("^%d+ %b() [ZX]")
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " signals:", function()
    local env = jr.test_env(backend)

    -- A stop that reached a worker between its fork and its exec ran the
    -- master's libevent handler there and was lost: the worker waited on
    -- its socket for good and the master in waitpid (1 start in 20 under
    -- load). The worker now gets default signal handling before exec, and
    -- the master kills what is left 2 s after the stop.
    it("SIGTERM while the workers are still starting exits all the same", function()
      env:config("concurrency = 4")
      env:script("a", "return function() end")
      for _ = 1, 40 do
        local p = env:start(nil, { wait = false })
        local status = env:stop("TERM", p, 10)
        -- 143: the signal came before the runner's handler was there
        assert.is_true(status == 0 or status == 143, "exit status " .. status)
      end
    end)

    it("SIGTERM lets the running job finish, returns unstarted claims, exits 0", function()
      env:config("concurrency = 1")
      env:script("slow", RECORD .. [[
        return function(job)
          record("started", job.id)
          os.execute("sleep 1")
          record("done", job.id)
        end]])
      local ids = {}
      for i = 1, 6 do ids[i] = env:push("slow") end
      env:start()
      jr.wait_for(function() return #lines(env.dir .. "/started") >= 1 end)
      assert.equal(0, env:stop("TERM"))
      local started, done = lines(env.dir .. "/started"), lines(env.dir .. "/done")
      assert.is_true(#started >= 1)
      assert.same(started, done)
      assert.is_true(#done < #ids, "every job ran before the signal took effect")
      -- what finished is gone, the rest is back in the queue as it was
      assert.equal(#ids - #done, env:count())
      assert.equal(0, env:count("running"))
      local finished = counts(done)
      for _, id in ipairs(ids) do
        local row = env:job(id)
        if finished[tostring(id)] then
          assert.is_nil(row)
        else
          assert.equal("queued", row.state)
          assert.equal(0, row.attempts)
          assert.is_true(row.locked_by == nil or row.locked_by == require("cjson").null)
          assert.is_true(row.run_at <= row.db_now + 1)
        end
      end
      assert.matches("shutting down", env:log(), 1, true)
      -- a new runner runs the rest
      env:start()
      jr.wait_for(function() return env:count() == 0 end, 30)
      assert.equal(0, env:stop())
      local all = counts(lines(env.dir .. "/done"))
      for _, id in ipairs(ids) do assert.equal(1, all[tostring(id)]) end
    end)

    for _, sigs in ipairs({ { "TERM", "TERM" }, { "INT", "INT" }, { "TERM", "INT" } }) do
      it(("a second signal (SIG%s, SIG%s) stops at once; the lease rescues the job")
          :format(sigs[1], sigs[2]), function()
        env:config("concurrency = 1, lease = 1, shutdown_timeout = 300")
        env:script("stuck", RECORD .. [[
          return function(job)
            local f = assert(io.open("/proc/self/stat"))
            record("worker", f:read("a"):match("^(%d+)"))
            f:close()
            record("started", job.id)
            while not io.open(os.getenv("PWD") .. "/release") do
              os.execute("sleep 0.05")
            end
            record("done", job.id)
          end]])
        local id = env:push("stuck")
        env:start()
        jr.wait_for(function() return #lines(env.dir .. "/started") == 1 end)
        env:signal(sigs[1])
        jr.wait_for(function() return env:log():find("shutting down", 1, true) end)
        assert.is_true(env:alive(), "runner exited with a job running")
        env:signal(sigs[2])
        -- well before shutdown_timeout
        jr.wait_for(function() return not env:alive() end, 15, "exit after second signal")
        -- the worker does not go on running the job on its own
        local wpid = lines(env.dir .. "/worker")[1]
        jr.wait_for(function() return not pid_alive(wpid) end, 10, "worker exit")
        assert.same({}, lines(env.dir .. "/done"))
        local row = env:job(id)
        assert.equal(1, row.attempts)
        -- a new runner rescues it once the lease expires and it completes
        jr.write_file(env.dir .. "/release", "")
        env:start()
        jr.wait_for(function() return env:count() == 0 end, 30)
        assert.same({ tostring(id) }, lines(env.dir .. "/done"))
        assert.same({ tostring(id), tostring(id) }, lines(env.dir .. "/started"))
        assert.equal(0, env:stop())
      end)
    end

    it("kill -9 of the runner: a restart rescues the leased jobs, none lost", function()
      env:config("concurrency = 2, lease = 1")
      env:script("work", RECORD .. [[
        return function(job)
          record("started", job.id)
          os.execute("sleep 0.5")
          record("done", job.id)
        end]])
      local ids = {}
      for i = 1, 8 do ids[i] = env:push("work") end
      env:start()
      jr.wait_for(function() return #lines(env.dir .. "/started") >= 2 end)
      env:stop("KILL")
      local leased = {}
      for _, r in ipairs(env:jobs("state = 'running'")) do leased[key(r.id)] = true end
      assert.is_true(next(leased) ~= nil, "no job was leased when the runner died")
      local p2 = env:start()
      jr.wait_for(function() return env:count() == 0 end, 60)
      assert.equal(0, env:count("running"))
      assert.equal(0, env:stats().dead)
      assert.matches("lease expired", env:log(p2), 1, true)
      assert.equal(0, env:stop())
      -- every job completed; only one that was in flight may have run twice
      local done = counts(lines(env.dir .. "/done"))
      for _, id in ipairs(ids) do
        local n = done[tostring(id)] or 0
        assert.is_true(n >= 1, ("job %d lost"):format(id))
        if not leased[tostring(id)] then
          assert.equal(1, n, ("job %d ran %d times"):format(id, n))
        end
      end
    end)

    it("drains 10,000 no-op jobs to zero queued and zero running, none dead", function()
      env:config("concurrency = 4")
      env:script("noop", "return function() end")
      local _, err, code = env:cli("migrate")
      assert.equal(0, code, err)
      if backend == "postgres" then
        env:exec("INSERT INTO jobs(name) SELECT 'noop' FROM generate_series(1,10000)")
      else
        env:exec("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<10000) " ..
                 "INSERT INTO jobs(name) SELECT 'noop' FROM c")
      end
      assert.equal(10000, env:count())
      env:start()
      jr.wait_for(function() return env:count() == 0 end, 600, "backlog drained")
      local s = env:stats()
      assert.equal(0, s.queued)
      assert.equal(0, s.running)
      assert.equal(0, s.dead)
      assert.equal(0, env:stop())
      assert.matches("10000 done, 0 failed, 0 dead", env:log(), 1, true)
    end)

    it("ends each of 50 always-failing jobs dead after exactly 3 attempts", function()
      env:config("concurrency = 4")
      env:script("fail", RECORD .. [[
        return { max_retries = 2, backoff = 0, handle = function(job)
          record("attempts", job.id .. " " .. job.attempt)
          error("failure " .. job.attempt)
        end }]])
      local _, err, code = env:cli("migrate")
      assert.equal(0, code, err)
      if backend == "postgres" then
        env:exec("INSERT INTO jobs(name) SELECT 'fail' FROM generate_series(1,50)")
      else
        env:exec("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<50) " ..
                 "INSERT INTO jobs(name) SELECT 'fail' FROM c")
      end
      env:start()
      jr.wait_for(function() return env:count("dead") == 50 end, 120, "50 dead")
      assert.equal(50, env:count())
      local per = {}
      for _, l in ipairs(lines(env.dir .. "/attempts")) do
        local id, n = l:match("^(%d+) (%d+)$")
        per[id] = per[id] or {}
        table.insert(per[id], tonumber(n))
      end
      for _, row in ipairs(env:jobs()) do
        assert.equal(3, row.attempts)
        assert.matches("failure 3", row.last_error, 1, true)
        assert.is_number(row.died_at)
        assert.same({ 1, 2, 3 }, per[key(row.id)])
      end
      local s = env:stats()
      assert.equal(50, s.dead)
      assert.equal(0, s.queued)
      assert.equal(0, s.running)
      assert.equal(0, env:stop())
    end)
  end)
end

-- limits_spec.lua - hard limits on handlers and workers: memory, a timeout
-- for a handler stuck in C, recycling after N jobs, workers that never
-- outlive their master, and a database that is not there yet at start.
local jr = require "jr"

local function children(pid)
  local out = jr.sh(("pgrep -P %d"):format(pid))
  local t = {}
  for p in out:gmatch("%d+") do t[#t + 1] = tonumber(p) end
  return t
end

local function alive(pid)
  local stat = jr.read_file("/proc/" .. pid .. "/stat")
  return stat ~= nil and not stat:match("^%d+ %b() [ZX]")
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " limits:", function()
    local env = jr.test_env(backend)

    it("fails a job over the memory limit and recycles its worker", function()
      env:config("memory_limit = 32, concurrency = 1")
      env:script("hog", [[return { max_retries = 0, handle = function()
        local t = {}
        for i = 1, 1e8 do t[i] = ("x"):rep(64) .. i end
      end }]])
      env:script("ok", [[return function(job)
        local f = assert(io.open(os.getenv("PWD") .. "/ok." .. job.id, "w"))
        f:close() end]])
      env:start()
      local id = env:push("hog")
      local row = jr.wait_for(function()
        local r = env:job(id)
        return r and r.state == "dead" and r
      end, 60)
      assert.equal("memory limit of 32 MiB exceeded", row.last_error)
      jr.wait_for(function() return env:log():find("recycled: a handler hit the memory limit") end)
      local ok = env:push("ok")
      jr.wait_for(function() return jr.read_file(("%s/ok.%d"):format(env.dir, ok)) end)
    end)

    it("kills a worker stuck in C past its timeout and fails the job", function()
      env:config("concurrency = 1")
      env:script("stuck", [[return { timeout = 1, max_retries = 0,
        handle = function() os.execute("sleep 30") end }]])
      env:start()
      local id = env:push("stuck")
      local row = jr.wait_for(function()
        local r = env:job(id)
        return r and r.state == "dead" and r
      end, 30)
      assert.equal("timed out after 1s (worker killed)", row.last_error)
      assert.matches("killing worker", env:log())
      assert.is_true(env:alive())
    end)

    it("recycles a worker after max_jobs_per_worker jobs", function()
      env:config("concurrency = 1, max_jobs_per_worker = 3")
      env:script("pid", [[return function()
        local f = assert(io.open("/proc/self/stat"))
        local pid = f:read("a"):match("^%d+")
        f:close()
        f = assert(io.open(os.getenv("PWD") .. "/pids", "a"))
        f:write(pid, "\n")
        f:close()
      end]])
      env:start()
      for _ = 1, 7 do env:push("pid") end
      jr.wait_for(function() return env:count() == 0 end)
      local seen, order = {}, {}
      for l in io.lines(env.dir .. "/pids") do
        if not seen[l] then order[#order + 1] = l end
        seen[l] = (seen[l] or 0) + 1
      end
      assert.equal(3, #order)           -- 3 + 3 + 1 jobs
      assert.equal(3, seen[order[1]])
      assert.equal(3, seen[order[2]])
    end)

    it("leaves no worker behind when the runner is killed with SIGKILL", function()
      env:config("concurrency = 2")
      env:script("x", "return function() end")
      env:start()
      local kids = jr.wait_for(function()
        local k = children(env.proc.pid)
        return #k == 2 and k
      end)
      env:stop("KILL")
      jr.wait_for(function()
        for _, k in ipairs(kids) do
          if alive(k) then return false end
        end
        return true
      end, 10, "workers exit with their master")
    end)

    it("waits for a database that is not there yet, then runs", function()
      local later, url
      if backend == "postgres" then
        later = jr.sh("mktemp -d /tmp/jrpglater.XXXXXX"):gsub("%s+$", "")
        url = ("postgresql:///postgres?host=%s&user=postgres"):format(later)
      else
        later = env.dir .. "/not-yet"
        url = "sqlite:" .. later .. "/jobs.db"
      end
      env.url = url
      env:config("")
      env:script("x", "return function() end")
      local p = env:start("", { wait = false })
      local function log() return env:log(p) end
      jr.wait_for(function() return log():find("retrying until it answers") end)
      assert.is_true(alive(p.pid))
      if backend == "postgres" then
        local _, err, code = jr.sh("spec/helpers/pgcluster.sh start " .. jr.quote(later))
        assert.equal(0, code, err)
      else
        os.execute("mkdir -p " .. jr.quote(later))
      end
      jr.wait_for(function() return log():find("database: reached after") end, 30)
      jr.wait_for(function() return log():find("loaded 1 handler") end)
      assert.equal(0, env:stop("TERM", p))
      if backend == "postgres" then
        jr.sh("spec/helpers/pgcluster.sh stop " .. jr.quote(later))
      end
    end)

    -- points env at a database that is not there (SQLite's: in dir)
    local function no_database(dir)
      env.url = backend == "postgres" and
        "postgresql:///postgres?host=/nonexistent-jr&user=postgres" or
        "sqlite:" .. env.dir .. "/" .. dir .. "/jobs.db"
    end

    it("stops at SIGTERM while it waits for the database, exit 0", function()
      no_database("not-yet")
      env:config("")
      env:script("x", "return function() end")
      local p = env:start("", { wait = false })
      jr.wait_for(function() return env:log(p):find("retrying until it answers") end)
      assert.equal(0, env:stop("TERM", p))
      assert.truthy(env:log(p):find("stopped (SIGTERM) before the database answered", 1, true),
        env:log(p))
    end)

    it("exits with a clear message when told not to wait for the database", function()
      no_database("missing/dir")
      env:config("wait_for_db = false")
      local _, err, code = env:cli("run")
      assert.equal(1, code)
      assert.matches(backend == "postgres" and "cannot connect" or "missing/dir", err)
    end)
  end)
end

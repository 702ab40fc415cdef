-- reload_loop_spec.lua - a broken file in scripts/ whose reload failed
-- starts no reload storm when a worker is replaced: the replacement loads
-- the files as they are now, and the failed reload's verdict stands until
-- they change (no reload again), the worker is replaced with backoff, why
-- is logged once. The running generation's jobs run on meanwhile, and
-- fixing the file reloads as usual. (Before: ~135 forks and ~600 log
-- lines a second, "loaded other handler code ...: reloading" and "reload
-- failed" in a loop, after a kill -9, a recycle or a scale-up.)
local jr = require "jr"

-- The live (not zombie) child processes of pid: its workers.
local function children(pid)
  local f = io.open(("/proc/%d/task/%d/children"):format(pid, pid))
  if not f then return {} end
  local list = f:read("a")
  f:close()
  local t = {}
  for kid in list:gmatch("%d+") do
    local s = io.open("/proc/" .. kid .. "/stat")
    local stat = s and s:read("l")
    if s then s:close() end
    if stat and not stat:match("^%d+ %b() [ZX]") then t[#t + 1] = kid end
  end
  return t
end

local function count(text, pat)
  local n = 0
  for _ in text:gmatch(pat) do n = n + 1 end
  return n
end

-- a.lua: each load (every worker start, every reload's loader) appends a
-- line to loads; each job writes done.ID
local function handler(dir, tag)
  return ([[
    local f = assert(io.open(%q, "a"))
    f:write("%s\n") f:close()
    return function(job)
      local o = assert(io.open(%q .. job.id, "w"))
      o:write("1") o:close()
    end]]):format(dir .. "/loads", tag, dir .. "/done." .. tag .. ".")
end

local function loads(env)
  return #jr.lines(env.dir .. "/loads")
end

local BROKEN = "return function(job) if then end"

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " reload loop:", function()
    local env = jr.test_env(backend, { config = "concurrency = 2" })

    -- breaks scripts/b.lua and waits for the reload that fails
    local function break_b(p)
      env:script("b", BROKEN)
      jr.wait_for(function()
        return env:log(p):find("reload failed", 1, true)
      end, 20, "the failed reload")
    end

    -- a runner with a.lua on 2 workers, then b.lua broken: the runner,
    -- the loads so far and the log's length then
    local function start_broken()
      env:script("a", handler(env.dir, "a"))
      local p = env:start()
      -- both workers loaded the files before b.lua breaks: one still
      -- loading would load the broken file, and with the other killed no
      -- worker of the running generation would be left to run a job
      jr.wait_for(function()
        return #children(p.pid) == 2 and loads(env) >= 2
      end, 20, "2 workers loaded")
      break_b(p)
      return p, loads(env), #env:log(p)
    end

    -- fixes b.lua: the reload happens and the new handler runs
    local function fix_b(p)
      env:script("b", handler(env.dir, "b"))
      jr.wait_for(function()
        return env:log(p):find("reloaded: generation", 1, true)
      end, 20, "the reload after the fix")
      local id = env:push("b")
      jr.wait_file(env.dir .. "/done.b." .. id, 20)
    end

    it("replaces a killed worker with backoff, no reload storm", function()
      local p, l0, log0 = start_broken()
      os.execute("kill -9 " .. children(p.pid)[1])
      local ids = {}
      for i = 1, 3 do ids[i] = env:push("a") end
      jr.sleep(3)
      local log = env:log(p):sub(log0 + 1)
      local forks = loads(env) - l0
      -- the replacement, the one reload it asked for, then one start per
      -- backoff step (0.1, 0.2, 0.4, 0.8, 1.6 s): before, ~400 loads and
      -- hundreds of reloads in 3 s. (On a loaded machine, under the
      -- sanitizers, the file's write may show as two changes, and a worker
      -- started before the failed reload's verdict ask once more: a few,
      -- never a storm.)
      assert.is_true(forks <= 20, forks .. " workers loaded in 3 s")
      assert.is_true(count(log, "reloading") <= 6,
                     count(log, "reloading") .. " reloads: " .. log:sub(1, 4000))
      assert.is_true(count(log, "reload failed") <= 5, log:sub(1, 4000))
      local cannot = count(log, "workers cannot start")
      assert.is_true(cannot >= 1 and cannot <= 2, cannot .. " 'cannot start' lines")
      assert.is_true(#jr.lines(p.err) < 100, #jr.lines(p.err) .. " log lines")
      -- the running generation ran the jobs pushed meanwhile
      for _, id in ipairs(ids) do
        local ok, e = pcall(jr.wait_file, env.dir .. "/done.a." .. id, 20)
        assert(ok, tostring(e) .. "\n" .. env:log(p) .. "\n" ..
          jr.sh(env.cli_prefix and "" or ("%s -c %s list"):format(jr.quote(jr.bin),
            jr.quote(env.config_file))))
      end
      fix_b(p)
      assert.truthy(env:log(p):find("workers start again", 1, true))
      assert.equal(0, env:stop())
    end)

    it("keeps running jobs when workers recycle (max_jobs_per_worker)", function()
      env:config("concurrency = 2, max_jobs_per_worker = 2")
      local p, l0, log0 = start_broken()
      local ids = {}
      local t_end = jr.now() + 3
      while jr.now() < t_end do
        ids[#ids + 1] = env:push("a")
        jr.sleep(0.2)
      end
      for _, id in ipairs(ids) do
        jr.wait_file(env.dir .. "/done.a." .. id, 20)
      end
      local log = env:log(p):sub(log0 + 1)
      local forks = loads(env) - l0
      assert.is_true(forks <= 24, forks .. " workers loaded")
      assert.is_true(count(log, "reloading") <= 6, log:sub(1, 4000))
      assert.is_true(count(log, "reload failed") <= 5, log:sub(1, 4000))
      fix_b(p)
      -- recycling goes on with the new generation
      local more = {}
      for i = 1, 6 do more[i] = env:push("a") end
      for _, id in ipairs(more) do
        jr.wait_file(env.dir .. "/done.a." .. id, 20)
      end
      assert.equal(0, env:stop())
    end)
  end)
end

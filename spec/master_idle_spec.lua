-- master_idle_spec.lua - the master works per event: long jobs ending one
-- after another cost it a few passes of its loop and database cycles
-- each (its own commits' wake-ups no longer start a round of re-checks),
-- and a runner with many workers runs its first job before all of them
-- are up (one loads first, the others once its claim is in). Nor does a
-- job cost it page faults: the memory a claim frees stays for the next,
-- nor more than a few file-lock calls on SQLite. At rest its loop wakes
-- about once a second, its timers' shared instants once.
local jr = require "jr"
local H = require "jrhttp"

-- The value of a /metrics series (the first line that starts so), or nil.
local function metric(text, series)
  local esc = series:gsub("[%p]", "%%%0")
  return tonumber(text:match("\n" .. esc .. " (%d+)"))
end

local function scrape(base)
  local code, text = H.req(base .. "/metrics", { token = true })
  assert.equal(200, code, text)
  local fin = metric(text, 'jobrunner_jobs_finished_total{name="long",' ..
                     'queue="default",outcome="succeeded"}') or 0
  return metric(text, "jobrunner_loop_passes_total"),
    assert(metric(text, "jobrunner_db_cycle_seconds_count"), text), fin
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " master at rest:", function()
    local env = jr.test_env(backend)

    it("spends a few loop passes and database cycles per long job that " ..
       "ends, not a round of re-checks", function()
      local N = 12
      env:script("long", 'return function() os.execute("sleep 0.15") end')
      for _ = 1, N do env:push("long") end
      local base = H.start(env, "concurrency = 1, watch = false")
      local p0, c0, f0 = scrape(base)
      jr.wait_for(function() return env:idle() end, 60, "all done")
      local p1, c1, f1 = scrape(base)
      local ended = f1 - f0
      assert.is_true(ended >= 4, "too few jobs ended while watched: " ..
                     ended)
      -- each job's end: its result recorded and the next one claimed (one
      -- cycle), the runner's own commit woke it (formerly 20 ms of
      -- re-checks, some 40 cycles and passes); the timers add a few
      assert.is_true((c1 - c0) / ended <= 8, ("%d cycles for %d jobs")
                     :format(c1 - c0, ended))
      assert.is_true((p1 - p0) / ended <= 16, ("%d passes for %d jobs")
                     :format(p1 - p0, ended))
      assert.equal(0, env:stop())
    end)

    it("records long jobs that end 5 ms apart in a few cycles, not one " ..
       "each", function()
      local N = 16
      -- each job, once the file go holds an instant, ends at that instant
      -- plus 5 ms times its payload's i, whenever it started: the ends
      -- 5 ms apart, each job claimed and running well before (the instant
      -- is given once all run, however slow the pushes were)
      local go = env.dir .. "/go"
      env:script("long", ([[
        local jr = require("jobrunner")
        return function(job)
          local f = io.open(%q)
          while not f do os.execute("sleep 0.02"); f = io.open(%q) end
          local at = f:read("n")
          f:close()
          local d = at + job.payload.i * 0.005 - jr.now()
          if d > 0 then os.execute(("sleep %%.3f"):format(d)) end
        end]]):format(go, go))
      local base = H.start(env, "concurrency = 16, watch = false")
      for i = 1, N do
        env:push("long", ('{"i": %d}'):format(i))
      end
      jr.wait_for(function() return env:count("running") == N end, 60,
                  "all running")
      local at = os.time() + 3
      jr.write_file(go .. ".tmp", ("%d\n"):format(at))
      os.rename(go .. ".tmp", go)
      -- counted from the second before the ends: the runner's own
      -- once-a-second cycles add one or two
      jr.wait_for(function() return os.time() >= at - 1 end, 60,
                  "the second before the ends")
      local _, c0, f0 = scrape(base)
      jr.wait_for(function() return env:count("running") == 0 end, 60,
                  "all done")
      local _, c1, f1 = scrape(base)
      assert.equal(N, f1 - f0)
      -- a long job's success waits up to 50 ms for company: the sixteen
      -- ends go in two cycles or three, a few more on a loaded machine
      -- (before, one each: 17 or 18 with the runner's own)
      assert.is_true(c1 - c0 <= 8, ("%d cycles for %d jobs"):format(c1 - c0,
                                                                   N))
      assert.equal(0, env:stop())
    end)

    it("takes no page fault per job once running", function()
      if jr.sh("objdump -p " .. jr.quote(jr.bin)):find("NEEDED%s+libasan") then
        pending("a sanitizer build's allocator takes page faults of its own")
        return
      end
      env:config("concurrency = 4, watch = false")
      env:script("short", 'return function() os.execute("sleep 0.05") end')
      local p = env:start()
      local function minflt()
        local stat = assert(jr.read_file("/proc/" .. p.pid .. "/stat"))
        -- field 10, after the command's (parenthesized) name
        return tonumber(stat:match("^%d+ %b() (.*)$"):match(
          "^%S+ %S+ %S+ %S+ %S+ %S+ %S+ (%d+)"))
      end
      assert.equal(jr.bin:match("[^/]+$"):sub(1, 15), (jr.read_file(
        "/proc/" .. p.pid .. "/comm") or ""):match("%S+"))
      local q = assert(require("jobrunner").open(env.url,
                                                 { schema = env.schema }))
      local function feed(n)    -- one at a time, as a producer does
        for _ = 1, n do
          assert(q:push("short"))
          os.execute("sleep 0.02")
        end
        jr.wait_for(function() return env:idle() end, 60, "all done")
      end
      feed(20)                  -- what the runner allocates once
      local f0 = minflt()
      feed(60)
      local faults = minflt() - f0
      q:close()
      -- a SQLite claim freed its sorter's pages back to the system, 14
      -- faults a job to take them again
      assert.is_true(faults <= 60, faults .. " page faults for 60 jobs")
      assert.equal(0, env:stop())
    end)

    it("takes a few file-lock calls per job on SQLite", function()
      if backend ~= "sqlite" or
         select(3, jr.sh("command -v strace >/dev/null")) ~= 0 then
        pending("SQLite, with strace installed")
        return
      end
      env:config("concurrency = 1, watch = false")
      env:script("short", 'return function() os.execute("sleep 0.05") end')
      local q = assert(require("jobrunner").open(env.url))
      for _ = 1, 40 do assert(q:push("short")) end
      q:close()
      local p = env:start()
      jr.wait_for(function() return env:count("queued") <= 36 end, 60,
                  "the first jobs run")
      -- strace counts the master's calls (its threads) while no other
      -- process writes: each job's end records its result and claims the
      -- next in one transaction, whose commit's wake-up is looked at
      local out, errf = env.dir .. "/strace.out", env.dir .. "/strace.err"
      os.execute(("strace -c -f -o %s -p %d 2>%s & echo $! >%s/strace.pid")
                 :format(jr.quote(out), p.pid, jr.quote(errf),
                         jr.quote(env.dir)))
      jr.wait_for(function() return (jr.read_file(errf) or "")
                    :find("attached") end, 30, "strace attached")
      local q0 = env:count("queued")
      jr.wait_for(function() return env:idle() end, 60, "all done")
      os.execute("kill -INT $(cat " .. jr.quote(env.dir .. "/strace.pid") ..
                 ")")
      jr.wait_for(function() return (jr.read_file(out) or "")
                    :find("total") end, 30, "strace's table")
      local calls = 0   -- % time, seconds, usecs/call, calls: the 4th
      for line in jr.read_file(out):gmatch("[^\n]+") do
        if line:match("%sfcntl$") then
          calls = tonumber(line:match("^%s*%S+%s+%S+%s+%S+%s+(%d+)"))
        end
      end
      assert.is_true(q0 >= 20, q0 .. " jobs watched")
      -- the look at its own commit's wake-up took a trial write
      -- transaction and a read one for data_version, 8 lock calls (12.4
      -- to 12.8 a job in all); data_version read in the first, 6 (10.6 to
      -- 10.8); the master's timers add a few calls a second, more a job
      -- when a loaded machine makes each job longer (11.7 at load 12)
      assert.is_true(calls / q0 <= 12.2, ("%d lock calls for %d jobs")
                     :format(calls, q0))
      assert.equal(0, env:stop())
    end)

    it("wakes its loop about once a second at rest, not four times",
       function()
      -- polls far apart: what wakes the master at rest is its own timers
      env:config('concurrency = 1, watch = false, poll_interval = 30, ' ..
                 'log = { level = "debug" }')
      env:script("short", "return function() end")
      local p = env:start()
      jr.wait_for(function()
        return env:log():find("loaded 1 handler", 1, true)
      end, 60, "the worker up")
      local function wakes()    -- the master's loop thread's sleeps
        local st = assert(jr.read_file(("/proc/%d/task/%d/status")
                                       :format(p.pid, p.pid)))
        return tonumber(st:match("\nvoluntary_ctxt_switches:%s*(%d+)"))
      end
      os.execute("sleep 1")     -- the start's last cycles
      local w0 = wakes()
      os.execute("sleep 3")
      local n = wakes() - w0
      -- its deadline and shutdown tick every 0.25 s while a job runs, a
      -- worker loads or a stop waits, once a second at rest: 15 or 16
      -- wake-ups in these 3 s before, 6 to 8 since
      assert.is_true(n <= 11, n .. " wake-ups in 3 s at rest")
      assert.equal(0, env:stop())
    end)

    it("wakes its loop for its timers together at rest, a poll a second",
       function()
      -- the poll, the cancels' look, the tick (each a second at rest), the
      -- prune and the lease's timers keep one grid: the instants they share
      -- wake the loop once, and their flags ride one database cycle
      env:config('concurrency = 1, watch = false, log = { level = "debug" }')
      env:script("short", "return function() end")
      local p = env:start()
      jr.wait_for(function()
        return env:log():find("loaded 1 handler", 1, true)
      end, 60, "the worker up")
      local function wakes()
        local st = assert(jr.read_file(("/proc/%d/task/%d/status")
                                       :format(p.pid, p.pid)))
        return tonumber(st:match("\nvoluntary_ctxt_switches:%s*(%d+)"))
      end
      os.execute("sleep 3")     -- the start's last cycles, its count at 2 s
      local w0 = wakes()
      os.execute("sleep 5")
      local n = wakes() - w0
      -- a timer and its cycle's end a second: 10 to 15 wake-ups in these
      -- 5 s; 25 to 35 when each timer kept the phase it was made at (the
      -- bound leaves room for a loaded machine's extra switches)
      assert.is_true(n <= 22, n .. " wake-ups in 5 s at rest")
      assert.equal(0, env:stop())
    end)

    it("runs its first job before all of its 16 workers are up", function()
      env:config('concurrency = 16, watch = false, log = { level = "debug" }')
      env:script("ok", [[return function(job)
        local f = assert(io.open(os.getenv("PWD") .. "/ok." .. job.id, "w"))
        f:write("1") f:close() end]])
      local id = env:push("ok")
      env:start()
      jr.wait_file(env.dir .. "/ok." .. id, 60)
      jr.wait_for(function()
        return env:log():find("worker 16 started", 1, true)
      end, 60, "16 workers")
      local log = env:log()
      local sent = log:find(("job %d (ok) to worker"):format(id), 1, true)
      assert.truthy(sent, log)
      assert.is_true(sent < log:find("worker 16 started", 1, true), log)
      -- and the first worker alone before it: its hello, then its claim
      assert.is_true(log:find("worker 1 started", 1, true) <
                     log:find("loaded 1 handler", 1, true), log)
      assert.is_true(log:find("loaded 1 handler", 1, true) <
                     log:find("worker 2 started", 1, true), log)
      assert.equal(0, env:stop())
    end)
  end)
end

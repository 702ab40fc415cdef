-- control_spec.lua - the runner's side of the operator's controls, on both
-- backends: cancel (queued, scheduled, running in Lua, stuck in C, a
-- handler that checks cancelled(); finished and unknown ids; a job
-- cancelled while running, then rerun, runs to completion), show and list
-- (JSON fields, filters, bad input), retention with pruning, and progress
-- (throttled in the worker, the last value kept); on PostgreSQL cancel
-- racing completion with two runners.
local jr = require "jr"
local cjson = require "cjson"

local LOOP = [[
  return function(job)
    record("started", job.id)
    while true do end
  end
]]

-- show ID --json, decoded; nil and the stderr when it fails.
local function show(env, id)
  local out, err, code = env:cli("show", tostring(id), "--json")
  if code ~= 0 then return nil, err, code end
  return cjson.decode(out)
end

local function started(env, n)
  jr.wait_for(function() return #jr.lines(env.dir .. "/started") >= (n or 1) end,
    20, "the handler starts")
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": cancel", function()
    local env = jr.test_env(backend)

    it("a queued job cancelled never runs and ends cancelled", function()
      env:script("c.rec", jr.RECORD .. [[
        return function(job) record("ran", job.id) end
      ]])
      local id = env:push("c.rec", "{}")
      local out, err, code = env:cli("cancel", tostring(id))
      assert.are.equal(0, code, err)
      assert.matches("job " .. id .. ": cancelled", out, 1, true)
      env:start()
      local other = env:push("c.rec", "{}")
      jr.wait_for(function() return #jr.lines(env.dir .. "/ran") >= 1 end, 20,
        "the other job runs")
      assert.are.same({ tostring(other) }, jr.lines(env.dir .. "/ran"))
      assert.are.equal("cancelled", env:job(id).state)
      env:stop()
    end)

    it("a scheduled job cancelled never runs when it becomes due", function()
      env:script("c.rec", jr.RECORD .. [[
        return function(job) record("ran", job.id) end
      ]])
      env:start()
      local id = env:push("c.rec", "{}", "--in", "2s")
      local out, _, code = env:cli("cancel", tostring(id))
      assert.are.equal(0, code)
      assert.matches("cancelled", out, 1, true)
      jr.sleep(3)
      local marker = env:push("c.rec", "{}")
      jr.wait_for(function() return #jr.lines(env.dir .. "/ran") >= 1 end, 20,
        "the marker job runs")
      assert.are.same({ tostring(marker) }, jr.lines(env.dir .. "/ran"))
      assert.are.equal("cancelled", env:job(id).state)
      env:stop()
    end)

    it("a running handler in a Lua loop is stopped and recorded cancelled, never retried", function()
      env:script("c.loop", jr.RECORD .. LOOP)
      env:script("c.rec", jr.RECORD .. [[
        return function(job) record("ran", job.id) end
      ]])
      env:start()
      local id = env:push("c.loop", "{}")
      started(env)
      local out, _, code = env:cli("cancel", tostring(id))
      assert.are.equal(0, code)
      assert.matches("cancel requested", out, 1, true)
      local row = env:wait_state(id, "cancelled", 15)
      assert.are.equal(1, row.attempts)
      assert.matches("cancelled", row.last_error)
      -- the same worker goes on with other jobs, and the job never reruns
      env:push("c.rec", "{}")
      jr.wait_for(function() return #jr.lines(env.dir .. "/ran") >= 1 end, 20,
        "the next job runs")
      assert.are.equal(1, #jr.lines(env.dir .. "/started"))
      assert.is_nil(env:log():find("retry in", 1, true))
      local j = show(env, id)
      assert.are.equal("cancelled", j.state)
      assert.is_string(j.finished_at)
      env:stop()
    end)

    it("a handler stuck in C is killed after the grace period and recorded cancelled", function()
      env:script("c.stuck", jr.RECORD .. [[
        return function(job)
          record("started", job.id)
          os.execute("sleep 60")
        end
      ]])
      env:script("c.rec", jr.RECORD .. [[
        return function(job) record("ran", job.id) end
      ]])
      env:start()
      local id = env:push("c.stuck", "{}")
      started(env)
      assert.are.equal(0, select(3, env:cli("cancel", tostring(id))))
      local row = env:wait_state(id, "cancelled", 30)
      assert.matches("cancel", row.last_error)
      assert.matches("killing worker", env:log(), 1, true)
      env:push("c.rec", "{}")
      jr.wait_for(function() return #jr.lines(env.dir .. "/ran") >= 1 end, 20,
        "a new worker runs the next job")
      assert.is_true(env:alive())
      env:stop()
    end)

    it("a handler that catches the cancel can see cancelled() and clean up", function()
      env:script("c.clean", jr.RECORD .. [[
        local jobrunner = require "jobrunner"
        return function(job)
          assert(jobrunner.cancelled() == false)
          record("started", job.id)
          local ok, err = pcall(function() while true do end end)
          if jobrunner.cancelled() then
            record("clean", tostring(ok) .. " " .. tostring(err))
          end
          return "swallowed"
        end
      ]])
      env:start()
      local id = env:push("c.clean", "{}")
      started(env)
      env:cli("cancel", tostring(id))
      env:wait_state(id, "cancelled", 15)
      local clean = jr.lines(env.dir .. "/clean")
      assert.are.equal(1, #clean)
      assert.matches("^false .*job " .. id .. " cancelled", clean[1])
      env:stop()
    end)

    it("cancelling a finished job says its state and changes nothing", function()
      env:script("c.bad", [[
        local jobrunner = require "jobrunner"
        return function() jobrunner.discard("no good") end
      ]])
      env:start()
      local id = env:push("c.bad", "{}")
      env:wait_state(id, "dead", 20)
      local out, err, code = env:cli("cancel", tostring(id))
      assert.are.equal(0, code, err)
      assert.matches("job " .. id .. ": already dead, nothing changed", out, 1, true)
      assert.are.equal("dead", env:job(id).state)
      env:stop()
    end)

    it("an unknown id is named and exits 5; the other ids are still cancelled", function()
      env:cli("migrate")
      local id = env:push("c.none", "{}")
      local out, err, code = env:cli("cancel", tostring(id), "987654")
      assert.are.equal(5, code)
      assert.matches("job " .. id .. ": cancelled", out, 1, true)
      assert.matches("no job with id 987654", err, 1, true)
      assert.are.equal("cancelled", env:job(id).state)
      local _, err2, code2 = env:cli("cancel", "abc")
      assert.are.equal(2, code2)
      assert.matches("job id", err2, 1, true)
    end)

    -- A cancel is of the run it was asked for: the job rerun after it runs
    -- (the master once kept the cancel told and refused every later run
    -- "cancelled before it started"). The handler is stuck only at its
    -- first start, so each run after the rerun completes.
    local FIRST_ONLY = [[
      local function starts(id)
        local n = 0
        for l in io.lines(os.getenv("PWD") .. "/started") do
          if l == tostring(id) then n = n + 1 end
        end
        return n
      end
      return function(job)
        record("started", job.id)
        if starts(job.id) == 1 then %s end
        record("done", job.id)
      end
    ]]

    local function rerun_runs(env, id, n)
      local out, err, code = env:cli("rerun", tostring(id))
      assert.are.equal(0, code, err)
      assert.matches(id .. " queued", out, 1, true)
      local row = env:wait_state(id, "completed", 20)
      assert.are.equal(n, #jr.lines(env.dir .. "/started"))
      assert.are.equal(n - 1, #jr.lines(env.dir .. "/done"))
      assert.are.equal(1, row.attempts)
    end

    it("a running job cancelled, then rerun, runs to completion; twice", function()
      env:config('retention = { completed = "1h" }, concurrency = 2')
      env:script("c.first", jr.RECORD .. FIRST_ONLY:format("while true do end"))
      -- a job that holds the other worker throughout: the runner is
      -- never idle, so the cancel must be forgotten when its run ends
      env:script("c.busy", jr.RECORD .. [[
        local jobrunner = require "jobrunner"
        return function(job)
          record("busy", job.id)
          while not io.open(os.getenv("PWD") .. "/release") do
            jobrunner.sleep(0.02)
          end
        end
      ]])
      env:start()
      local busy = env:push("c.busy", "{}")
      jr.wait_for(function() return #jr.lines(env.dir .. "/busy") >= 1 end, 20,
        "the busy job starts")
      local id = env:push("c.first", "{}")
      started(env)
      assert.are.equal(0, select(3, env:cli("cancel", tostring(id))))
      local row = env:wait_state(id, "cancelled", 15)
      assert.matches("cancelled while running", row.last_error, 1, true)
      jr.sleep(1.5)             -- a cancel poll or more after its end
      rerun_runs(env, id, 2)
      rerun_runs(env, id, 3)
      assert.are.equal("running", env:job(busy).state)
      io.open(env.dir .. "/release", "w"):close()
      env:wait_state(busy, "completed", 20)
      assert.is_nil(env:log():find("cancelled before it started", 1, true))
      env:stop()
    end)

    it("a job whose worker was killed for a cancel, then rerun, runs to completion; twice", function()
      env:config('retention = { completed = "1h" }')
      env:script("c.stuck1", jr.RECORD .. FIRST_ONLY:format('os.execute("sleep 60")'))
      env:start()
      local id = env:push("c.stuck1", "{}")
      started(env)
      assert.are.equal(0, select(3, env:cli("cancel", tostring(id))))
      local row = env:wait_state(id, "cancelled", 30)
      assert.matches("worker killed", row.last_error, 1, true)
      jr.sleep(1.5)
      rerun_runs(env, id, 2)
      rerun_runs(env, id, 3)
      env:stop()
    end)
  end)

  describe(backend .. ": show and list", function()
    local env = jr.test_env(backend)

    it("show --json gives every field, the error with its traceback", function()
      env:script("s.fail", [[
        return { max_retries = 0, handle = function(job) error("broke here") end }
      ]])
      env:start()
      local id = env:push("s.fail", '{"user":7}', "--queue", "mail",
        "--priority", "3", "--max-retries", "0")
      env:wait_state(id, "dead", 20)
      env:stop()
      local j = assert(show(env, id))
      for _, k in ipairs({ "id", "name", "queue", "state", "payload", "attempt",
          "max_retries", "priority", "run_at", "created_at", "started_at",
          "finished_at", "last_error", "generation", "locked_by", "progress" }) do
        assert.is_not_nil(rawget(j, k), k)
      end
      assert.are.equal(id, j.id)
      assert.are.equal("s.fail", j.name)
      assert.are.equal("mail", j.queue)
      assert.are.equal("dead", j.state)
      assert.are.same({ user = 7 }, j.payload)
      assert.are.equal(1, j.attempt)
      assert.are.equal(0, j.max_retries)
      assert.are.equal(3, j.priority)
      assert.is_string(j.started_at)
      assert.is_string(j.finished_at)
      assert.matches("broke here", j.last_error)
      assert.matches("traceback", j.last_error)
      assert.is_string(j.generation)
      assert.are.equal(cjson.null, j.locked_by)
      local text = env:cli("show", tostring(id))
      assert.matches("payload%s+{\"user\": ?7}", text)
      assert.matches("state%s+dead", text)
    end)

    it("show of an unknown id names it and exits 5", function()
      env:cli("migrate")
      local j, err, code = show(env, 424242)
      assert.is_nil(j)
      assert.are.equal(5, code)
      assert.matches("no job with id 424242", err, 1, true)
    end)

    it("list gives jobs newest first without payload, filtered", function()
      env:cli("migrate")
      local a = env:push("l.one", '{"secret":1}', "--queue", "q1")
      local b = env:push("l.two", "{}", "--queue", "q2")
      local c = env:push("l.one", "{}", "--in", "1h")
      env:cli("cancel", tostring(b))
      local out, err, code = env:cli("list", "--json")
      assert.are.equal(0, code, err)
      local all = cjson.decode(out)
      assert.are.same({ c, b, a }, { all[1].id, all[2].id, all[3].id })
      assert.is_nil(all[3].payload)
      assert.is_nil(out:find("secret", 1, true))
      local function ids(...)
        local o = assert(env:cli("list", "--json", ...))
        local t = {}
        for _, r in ipairs(cjson.decode(o)) do t[#t + 1] = r.id end
        return t
      end
      assert.are.same({ c, a }, ids("--name", "l.one"))
      assert.are.same({ b }, ids("--queue", "q2"))
      assert.are.same({ b }, ids("--state", "cancelled"))
      assert.are.same({ c }, ids("--state", "scheduled"))
      assert.are.same({ a }, ids("--state", "ready"))
      assert.are.same({ c }, ids("--limit", "1"))
      local text = env:cli("list")
      assert.matches("ID%s+NAME%s+QUEUE%s+STATE", text)
    end)

    it("list with a bad --state says which states there are and exits 2", function()
      env:cli("migrate")
      local _, err, code = env:cli("list", "--state", "finished")
      assert.are.equal(2, code)
      assert.matches("unknown job state 'finished'", err, 1, true)
      assert.matches("queued, ready, scheduled, running, dead, cancelled, completed",
        err, 1, true)
      local _, err2, code2 = env:cli("list", "--limit")
      assert.are.equal(2, code2)
      assert.matches("--limit", err2, 1, true)
    end)
  end)

  describe(backend .. ": retention", function()
    local env = jr.test_env(backend)

    it("by default a completed job is deleted at once", function()
      env:script("r.ok", "return function() end")
      env:start()
      local id = env:push("r.ok", "{}")
      jr.wait_for(function() return env:count() == 0 end, 20, "deleted")
      local _, _, code = show(env, id)
      assert.are.equal(5, code)
      env:stop()
    end)

    it("completed jobs stay for the retention period, then are pruned", function()
      env:config('retention = { completed = "3s", cancelled = 2 }')
      env:script("r.ok", "return function() end")
      env:start()
      local id = env:push("r.ok", "{}")
      local gone = env:push("r.ok", "{}", "--in", "1h")
      env:cli("cancel", tostring(gone))
      jr.wait_for(function()
        local j = show(env, id)
        return j and j.state == "completed"
      end, 20, "completed")
      local j = show(env, id)
      assert.is_string(j.finished_at)
      local out = env:cli("list", "--state", "completed", "--json")
      assert.are.equal(id, cjson.decode(out)[1].id)
      jr.wait_for(function() return env:count() == 0 end, 30,
        "the completed and cancelled jobs are pruned")
      env:stop()
    end)

    it("dead jobs are kept unless retention.dead is set", function()
      env:config('retention = { dead = "1s" }')
      env:script("r.dead", [[
        local jobrunner = require "jobrunner"
        return function() jobrunner.discard("no") end
      ]])
      env:start()
      local id = env:push("r.dead", "{}")
      env:wait_state(id, "dead", 20)
      jr.wait_for(function() return env:count() == 0 end, 30, "dead pruned")
      env:stop()
    end)

    it("a bad retention value is a config error naming file:line and key", function()
      env:config('retention = {\n  completed = "soon" }')
      local line
      for i, l in ipairs(jr.lines(env.config_file)) do
        if l:find("completed =", 1, true) then line = i end
      end
      local _, err, code = env:cli("check")
      assert.are.equal(3, code)
      assert.matches("jobrunner.lua:" .. line ..
        ": 'retention.completed' must be seconds or a duration", err, 1, true)
      env:config('retention = { cancelled = -1 }')
      _, err, code = env:cli("check")
      assert.are.equal(3, code)
      assert.matches("'retention.cancelled' is out of range", err, 1, true)
      env:config('retention = { kept = 1 }')
      _, err = env:cli("check")
      assert.matches("unknown key 'retention.kept'", err, 1, true)
    end)
  end)

  describe(backend .. ": progress", function()
    local env = jr.test_env(backend, { config = 'log = { level = "debug" }' })

    it("a handler reporting 1000 times is written a few times; the last value is kept", function()
      env:config('log = { level = "debug" }, retention = { completed = "1h" }')
      env:script("p.many", [[
        local jobrunner = require "jobrunner"
        return function(job)
          for i = 1, 1000 do jobrunner.progress(i, 1000, "step " .. i) end
        end
      ]])
      env:start()
      local id = env:push("p.many", "{}")
      jr.wait_for(function()
        local j = show(env, id)
        return j and j.state == "completed"
      end, 20, "completed")
      local j = show(env, id)
      assert.are.same({ done = 1000, total = 1000, note = "step 1000" }, j.progress)
      local writes = select(2, env:log():gsub("job " .. id .. " progress", ""))
      assert.is_true(writes >= 1 and writes <= 3, "progress writes: " .. writes)
      assert.matches("1000/1000", env:cli("list"), 1, true)
      env:stop()
    end)

    it("progress of a running job shows while it runs; bad arguments fail the job", function()
      env:script("p.slow", jr.RECORD .. [[
        local jobrunner = require "jobrunner"
        return function(job)
          jobrunner.progress(3, nil, "warming up")
          record("started", job.id)
          while true do end
        end
      ]])
      env:script("p.bad", [[
        local jobrunner = require "jobrunner"
        return { max_retries = 0, handle = function() jobrunner.progress(-1) end }
      ]])
      env:start()
      local id = env:push("p.slow", "{}")
      started(env)
      jr.wait_for(function()
        local j = show(env, id)
        return j and j.progress ~= cjson.null and j.progress.done == 3
      end, 20, "progress shown")
      local j = show(env, id)
      assert.are.equal("warming up", j.progress.note)
      assert.are.equal(cjson.null, j.progress.total)
      assert.are.equal("running", j.state)
      local st = env:stats()
      assert.are.equal(id, st.progress[1].id)
      assert.are.equal(3, st.progress[1].done)
      assert.are.equal("warming up", st.progress[1].note)
      assert.matches("3 warming up", env:cli("stats"), 1, true)
      env:cli("cancel", tostring(id))
      env:wait_state(id, "cancelled", 15)
      local bad = env:push("p.bad", "{}")
      local row = env:wait_state(bad, "dead", 20)
      assert.matches("bad argument #1 to 'progress'", row.last_error, 1, true)
      env:stop()
    end)
  end)
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": the Lua module's control calls", function()
    local env = jr.test_env(backend)

    it("q:cancel, q:show and q:list", function()
      env:cli("migrate")
      local client = require "jobrunner.client"
      local q = assert(client.open(env.url, backend == "postgres" and
        { schema = env.schema } or nil))
      local a = assert(q:push("m.one", { n = 1 }, { queue = "mq", priority = 2 }))
      local b = assert(q:push("m.two", {}))
      local j = assert(q:show(a))
      assert.are.equal("m.one", j.name)
      assert.are.equal("mq", j.queue)
      assert.are.equal("queued", j.state)
      assert.are.same({ n = 1 }, cjson.decode(j.payload))
      assert.are.equal(2, j.priority)
      assert.is_number(j.created_at)
      assert.is_nil(j.finished_at)
      local none, msg = q:show(999999)
      assert.is_nil(none)
      assert.matches("999999", msg)
      local l = assert(q:list())
      assert.are.same({ b, a }, { l[1].id, l[2].id })
      assert.is_nil(l[1].payload)
      assert.are.same({ a }, { assert(q:list{ queue = "mq" })[1].id })
      local bad, why = q:list{ state = "nope" }
      assert.is_nil(bad)
      assert.matches("unknown job state 'nope'", why, 1, true)
      assert.are.same({ "cancelled", "notfound" }, assert(q:cancel(a, 999999)))
      assert.are.same({ "finished" }, assert(q:cancel(a)))
      assert.are.equal("cancelled", assert(q:show(a)).state)
      q:close()
    end)
  end)
end

if jr.pg_url then
  describe("postgres: cancel racing completion", function()
    local env = jr.test_env("postgres")

    it("with two runners each job has exactly one outcome", function()
      env:config('retention = { completed = "1h" }, concurrency = 2')
      env:script("race.job", jr.RECORD .. [[
        return function(job)
          local t = os.clock() + 0.05 * (job.id % 4)
          while os.clock() < t do end
          record("done", job.id)
        end
      ]])
      local ids = {}
      for i = 1, 40 do ids[i] = env:push("race.job", "{}") end
      env:start()
      env:start()
      for i = 1, 40 do env:cli("cancel", tostring(ids[i])) end
      jr.wait_for(function()
        return #env:jobs("state NOT IN ('completed', 'cancelled')") == 0
      end, 60, "every job finished one way")
      local ran = {}
      for _, l in ipairs(jr.lines(env.dir .. "/done")) do
        ran[tonumber(l)] = (ran[tonumber(l)] or 0) + 1
      end
      for _, row in ipairs(env:jobs()) do
        assert.is_true((ran[row.id] or 0) <= 1, "job ran twice: " .. row.id)
        if row.state == "completed" then
          assert.are.equal(1, ran[row.id], "completed but never ran: " .. row.id)
        end
      end
      assert.are.equal(40, #env:jobs())
      env:stop(nil, env.procs[1])
      env:stop(nil, env.procs[2])
    end)
  end)
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": control commands without a database", function()
    local env = jr.test_env(backend)

    for _, cmd in ipairs({ { "cancel", "1" }, { "dead", "retry", "1" },
                           { "dead", "retry", "--all" }, { "dead", "purge" },
                           { "dead", "purge", "--older-than", "1h" },
                           { "queue", "pause", "q" }, { "queue", "resume", "q" } }) do
      it(table.concat(cmd, " ") .. " refuses, naming the database, and creates none", function()
        local out, err, code = env:cli(table.unpack(cmd))
        assert.are.equal(4, code, err)
        assert.are.equal("", out)
        assert.matches("does not exist", err, 1, true)
        if backend == "sqlite" then
          assert.matches(env:sqlite_path(), err, 1, true)
          assert.is_nil(jr.read_file(env:sqlite_path()))
        else
          assert.matches(env.schema, err, 1, true)
          local n = jr.sh(("psql -X -q -A -t %s -c %s"):format(jr.quote(jr.pg_url),
            jr.quote(("SELECT count(*) FROM pg_namespace WHERE nspname = '%s'")
              :format(env.schema))))
          assert.are.equal("0", (n:gsub("%s", "")))
        end
      end)
    end
  end)
end

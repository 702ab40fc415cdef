-- queues_spec.lua - named queues on the runner side: each queue's cap in
-- the config (`queues`), which queues a runner serves (`--queues`,
-- `serve_queues`), fairness between queues, pause and resume honoured by
-- every runner within a second, `jobrunner queue list/pause/resume`, the
-- Lua module's q:pause/q:resume/q:queues, and on_tick's per-queue figures
-- and targets. Bad queue settings are errors naming file:line.
local jr = require "jr"
local cjson = require "cjson"

-- A handler that records "queue start end" (epoch seconds) to file
-- after sleeping secs (a blocking sleep: it leaves the CPU to others).
local function sleeper(file, secs)
  return jr.RECORD .. ([[
    local jobrunner = require "jobrunner"
    return function(job)
      local t0 = jobrunner.now()
      os.execute("sleep %s")
      record(%q, job.queue .. " " .. t0 .. " " .. jobrunner.now())
    end
  ]]):format(secs, file)
end

local max_overlap, client, line_of = jr.max_overlap, jr.client, jr.line_of

local function queue_list(env)
  local out, err, code = env:cli("queue", "list", "--json")
  assert(code == 0, "queue list failed: " .. err)
  local byname = {}
  for _, q in ipairs(cjson.decode(out)) do byname[q.name] = q end
  return byname
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": queues with their own concurrency", function()
    local env = jr.test_env(backend)

    it("a slow queue at its cap while another queue's jobs keep flowing", function()
      env:config("concurrency = 4, queues = { slow = 1 }")
      env:script("q.slow", sleeper("slow", "0.5"))
      env:script("q.fast", jr.RECORD .. [[
        return function(job) record("fast", job.id) end
      ]])
      local q = client(env)
      local slow, fast = {}, {}
      for i = 1, 6 do slow[i] = { "q.slow", {}, { queue = "slow" } } end
      for i = 1, 20 do fast[i] = { "q.fast", {}, { queue = "fast" } } end
      assert(q:push_many(slow))
      env:start()
      assert(q:push_many(fast))
      q:close()
      jr.wait_for(function() return #jr.lines(env.dir .. "/fast") == 20 end, 20,
        "the fast queue's jobs run")
      assert.is_true(#jr.lines(env.dir .. "/slow") < 4,
        "the fast jobs did not wait for the slow queue's backlog")
      jr.wait_for(function() return #jr.lines(env.dir .. "/slow") == 6 end, 30,
        "the slow queue drains")
      assert.are.equal(1, max_overlap(jr.lines(env.dir .. "/slow")))
      env:stop()
    end)

    it("a capped queue of short jobs drains as its jobs end, not at each poll", function()
      env:config("concurrency = 2, poll_interval = 3600, queues = { small = 2, tiny = 1 }")
      env:script("q.short", "return function() end")
      local q = client(env)
      local batch = {}
      for i = 1, 600 do
        batch[i] = { "q.short", {}, { queue = i % 3 == 0 and "tiny" or "small" } }
      end
      assert(q:push_many(batch))
      env:start()
      jr.wait_for(function() return env:count() == 0 end, 30,
        "600 jobs in capped queues drain")
      q:close()
      env:stop()
    end)

    it("a trickle in one queue starts quickly behind a 10,000-job backlog in another", function()
      env:config("concurrency = 2")
      env:script("q.bulk", [[
        return function() os.execute("sleep 0.02") end
      ]])
      env:script("q.urgent", jr.RECORD .. [[
        local jobrunner = require "jobrunner"
        return function(job)
          record("urgent", tostring(jobrunner.now() - job.created_at))
        end
      ]])
      local q = client(env)
      local batch = {}
      for i = 1, 10000 do batch[i] = { "q.bulk", {}, { queue = "bulk" } } end
      assert(q:push_many(batch))
      env:start()
      jr.sleep(1)
      for i = 1, 5 do
        assert(q:push("q.urgent", {}, { queue = "urgent" }))
        jr.wait_for(function() return #jr.lines(env.dir .. "/urgent") == i end,
          10, "urgent job " .. i .. " runs")
        jr.sleep(0.2)
      end
      for _, l in ipairs(jr.lines(env.dir .. "/urgent")) do
        assert.is_true(tonumber(l) < 5, "an urgent job waited " .. l .. "s")
      end
      assert.is_true(q:stats().queued > 5000, "the backlog is far from drained")
      q:close()
      env:stop()
    end)

    it("on_tick sees each queue's figures and may set its target within min..max", function()
      env:config([[tick_interval = 0.2,
        queues = { media = { min = 0, max = 2 } },
        hooks = { on_tick = function(t)
          local m = t.queues and t.queues.media
          if m then
            local f = io.open("tick", "a")
            f:write(("%d %d %d %d %d\n"):format(m.ready, m.running, m.cap,
              m.min, m.max))
            f:close()
          end
          return { queues = { media = 0 } }
        end }]])
      env:script("q.media", jr.RECORD .. [[
        return function(job) record("ran", job.queue) end
      ]])
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/tick") >= 1 end, 10,
        "on_tick runs")
      env:push("q.media", "{}", "--queue", "media")
      jr.wait_for(function()
        local l = jr.lines(env.dir .. "/tick")
        return l[#l]:match("^1 ")
      end, 10, "on_tick sees the ready job")
      assert.are.same({}, jr.lines(env.dir .. "/ran"))
      local l = jr.lines(env.dir .. "/tick")
      assert.are.equal("1 0 0 0 2", l[#l])
      env:stop()
    end)
  end)

  describe(backend .. ": which queues a runner serves", function()
    local env = jr.test_env(backend)

    local function three_jobs()
      env:script("q.any", jr.RECORD .. [[
        return function(job) record("ran", job.queue) end
      ]])
      env:push("q.any", "{}", "--queue", "media")
      env:push("q.any", "{}", "--queue", "mail")
      env:push("q.any", "{}", "--queue", "other")
    end

    it("runs only the jobs of the queues --queues names", function()
      env:config("queues = { media = 2, mail = 1 }")
      three_jobs()
      env:start(nil, { args = { "--queues", "mail" } })
      jr.wait_for(function() return #jr.lines(env.dir .. "/ran") >= 1 end, 20,
        "the mail job runs")
      jr.sleep(1)
      assert.are.same({ "mail" }, jr.lines(env.dir .. "/ran"))
      assert.matches("serving queues: mail", env:log())
      env:stop()
    end)

    it("serve_queues in the config does the same; --queues overrides it", function()
      env:config([[serve_queues = { "media", "other" }]])
      three_jobs()
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/ran") >= 2 end, 20,
        "the media and other jobs run")
      jr.sleep(1)
      local ran = jr.lines(env.dir .. "/ran")
      table.sort(ran)
      assert.are.same({ "media", "other" }, ran)
      env:stop()
      env:start(nil, { args = { "--queues", "mail" } })
      jr.wait_for(function() return #jr.lines(env.dir .. "/ran") >= 3 end, 20,
        "the mail job runs")
      env:stop()
    end)

    it("refuses an invalid or unknown queue in --queues", function()
      env:config("queues = { media = 2, mail = 1 }")
      local _, err, code = env:cli("run", "--queues", "mail,bad/name")
      assert.are.equal(2, code)
      assert.matches("%-%-queues: invalid queue name 'bad/name'", err)
      _, err, code = env:cli("run", "--queues", "mail,nosuch")
      assert.are.equal(2, code)
      assert.matches("%-%-queues: unknown queue 'nosuch' %(not in the config's 'queues': mail, media%)", err)
      _, err, code = env:cli("run", "--queues")
      assert.are.equal(2, code)
      assert.matches("needs a value", err)
      _, err, code = env:cli("run", "--queues", "mail,,media")
      assert.are.equal(2, code)
      assert.matches("empty queue name", err)
    end)
  end)

  describe(backend .. ": bad queue settings", function()
    local env = jr.test_env(backend)

    local cases = {
      { "queues = { media = -1 }", "'queues.media' is out of range %(0 to 4096%)" },
      { "queues = { media = 1.5 }", "'queues.media' must be a whole number, got a fraction" },
      { "queues = { media = 'two' }", "'queues.media' must be a number or { min = A, max = B }, got string" },
      { "queues = { media = { min = 3, max = 1 } }", "'queues.media' has max below min" },
      { "queues = { media = { min = 1, most = 2 } }", "'queues.media' has an unknown key 'most' %(valid: min, max%)" },
      { "queues = { ['bad/name'] = 1 }", "'queues' has an invalid queue name 'bad/name'" },
      { "queues = 4", "'queues' must be a table of queue = concurrency, got number" },
      { "serve_queues = { 'mail', 7 }", "'serve_queues' must be a list of queue names, got number" },
      { "queues = { media = 1 }, serve_queues = { 'mail' }",
        "'serve_queues' names unknown queue 'mail' %(not in the config's 'queues': media%)" },
    }
    for _, c in ipairs(cases) do
      it("says where: " .. c[1], function()
        env:config(c[1])
        local _, err, code = env:cli("check")
        assert.are.equal(3, code)
        local line = line_of(env, c[1])
        assert.matches("jobrunner.lua:" .. line .. ": " .. c[2], err)
      end)
    end
  end)

  describe(backend .. ": pause and resume", function()
    local env = jr.test_env(backend)

    it("nothing of a paused queue starts on either of two runners; resume runs them", function()
      -- 3 ms jobs: short enough for each runner to claim a local queue of
      -- hundreds ahead, which the pause must stop too
      local extra = "concurrency = 1"
      env:config(extra .. (", pid_file = %q"):format(env.dir .. "/second.pid"))
      local second = env.dir .. "/second.lua"
      os.rename(env.config_file, second)
      env:config(extra)
      env:script("q.media", jr.RECORD .. [[
        local jobrunner = require "jobrunner"
        return function(job)
          local t0 = jobrunner.now()
          jobrunner.sleep(math.max(0, t0 + 0.003 - jobrunner.now()))
          record("started", tostring(t0))
        end
      ]])
      local q = client(env)
      local batch = {}
      for i = 1, 3000 do batch[i] = { "q.media", {}, { queue = "media" } } end
      assert(q:push_many(batch))
      local first = env:start()
      local main = env.config_file
      env.config_file = second
      local ok, err = pcall(env.start, env)
      env.config_file = main
      assert(ok, err)
      jr.wait_for(function() return #jr.lines(env.dir .. "/started") >= 200 end,
        20, "jobs start")
      local out, perr, code = env:cli("queue", "pause", "media")
      local paused_at = jr.now()
      assert(code == 0, perr)
      assert.matches("paused queue 'media'", out)
      jr.sleep(2.5)
      local late = 0
      for _, l in ipairs(jr.lines(env.dir .. "/started")) do
        if tonumber(l) > paused_at + 1 then late = late + 1 end
      end
      assert.are.equal(0, late)
      local n = #jr.lines(env.dir .. "/started")
      assert.is_true(n < 3000, "jobs were left to run")
      assert.is_true(queue_list(env).media.paused)
      assert.are.equal(0, queue_list(env).media.running)
      out, perr, code = env:cli("queue", "resume", "media")
      assert(code == 0, perr)
      assert.matches("resumed queue 'media'", out)
      jr.wait_for(function() return #jr.lines(env.dir .. "/started") == 3000 end,
        60, "every job runs after the resume")
      q:close()
      env:stop(nil, first)
      env:stop()
    end)
  end)

  describe(backend .. ": queue list and control", function()
    local env = jr.test_env(backend)

    it("queue list --json gives each queue's counts and this config's concurrency", function()
      env:config("queues = { media = 2, mail = { min = 0, max = 3 } }")
      env:push("q.x", "{}", "--queue", "media")
      env:push("q.x", "{}", "--queue", "media")
      env:push("q.x", "{}", "--queue", "media", "--in", "1h")
      env:push("q.x", "{}", "--queue", "other")
      local _, err, code = env:cli("queue", "pause", "mail")
      assert(code == 0, err)
      local l = queue_list(env)
      assert.are.same({ name = "media", paused = false, ready = 2, scheduled = 1,
                        running = 0, dead = 0, concurrency = 2 }, l.media)
      assert.are.same({ name = "mail", paused = true, ready = 0, scheduled = 0,
                        running = 0, dead = 0, concurrency = 3 }, l.mail)
      assert.are.equal(cjson.null, l.other.concurrency)
      local out = env:cli("queue", "list")
      assert.matches("mail%s+paused", out)
      assert.matches("media%s+active%s+2%s+1", out)
    end)

    it("queue pause and resume refuse a bad name and a missing one", function()
      local _, err, code = env:cli("queue", "pause", "bad/name")
      assert.are.equal(2, code)
      assert.matches("invalid queue name 'bad/name'", err)
      _, err, code = env:cli("queue", "resume")
      assert.are.equal(2, code)
      assert.matches("queue resume: missing the queue NAME", err)
      _, err, code = env:cli("queue", "frobnicate")
      assert.are.equal(2, code)
      assert.matches("queue: unknown subcommand 'frobnicate'", err)
    end)

    it("the Lua module pauses, resumes and lists queues", function()
      env:cli("migrate")
      local q = client(env)
      assert.is_true(q:pause("media"))
      local list = q:queues()
      assert.are.equal("media", list[1].name)
      assert.is_true(list[1].paused)
      assert.is_true(list[1].paused_at > 0)
      assert.is_true(q:resume("media"))
      assert.is_false(q:queues()[1].paused)
      local ok, msg = q:pause("bad/name")
      assert.is_nil(ok)
      assert.matches("invalid queue name 'bad/name'", msg)
      assert.has_error(function() q:pause({}) end)
      q:close()
    end)
  end)
end

-- The queues table keeps a row per queue name a job was pushed to; a
-- claim probes every row. Rows of queues with no job left, not paused and
-- not in the config go after retention.queues (default 1h).
for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": idle queues", function()
    local env = jr.test_env(backend)

    local function names(env)
      local t = {}
      for _, r in ipairs(env:query("SELECT name FROM queues ORDER BY name")) do
        t[#t + 1] = r.name
      end
      return t
    end

    local function drain_dynamic(env)
      env:script("q.ok", "return function() end")
      env:script("q.bad", "return function() error('no') end")
      local q = client(env)
      local jobs = {}
      for i = 1, 60 do jobs[i] = { "q.ok", {}, { queue = "dyn." .. i } } end
      jobs[#jobs + 1] = { "q.ok", {}, { queue = "keep" } }
      jobs[#jobs + 1] = { "q.bad", {}, { queue = "held" } }
      assert(q:push_many(jobs))
      assert(q:pause("stopped"))
      q:close()
      assert.are.equal(63, #names(env))
      env:start()
      jr.wait_for(function() return env:count() == 1 and env:count("dead") == 1 end,
        30, "drained, one dead")
    end

    it("go once empty and older than an hour; paused, configured and dead-holding ones stay", function()
      env:config("queues = { keep = 2 }, defaults = { max_retries = 0 }")
      drain_dynamic(env)
      env:stop()
      env:exec(backend == "postgres" and
        "UPDATE queues SET updated_at = now() - interval '2 hours'" or
        "UPDATE queues SET updated_at = updated_at - 7200")
      env:start()
      jr.wait_for(function() return #names(env) == 3 end, 30, "idle queues pruned")
      assert.are.same({ "held", "keep", "stopped" }, names(env))
      -- a push makes its queue known again, and its job runs
      env:push("q.ok", "{}", "--queue", "dyn.7")
      jr.wait_for(function() return env:count() == 1 end, 20, "dyn.7's job ran")
      assert.is_true(env:alive())
    end)

    it("retention.queues sets how long an idle queue keeps its row", function()
      env:config("queues = { keep = 2 }, defaults = { max_retries = 0 }, " ..
        "retention = { queues = 1 }")
      drain_dynamic(env)
      jr.wait_for(function() return #names(env) == 3 end, 30, "idle queues pruned")
      assert.are.same({ "held", "keep", "stopped" }, names(env))
    end)
  end)
end

-- A claim looks for work in the queues with queued jobs, not in every row
-- of the queues table: 100,000 rows of queues used once held SQLite's
-- write lock through each claim of a few long jobs, and producers and
-- stats waited out their busy timeout ("database is locked").
describe("sqlite: claims beside 100,000 idle queues", function()
  local env = jr.test_env("sqlite")

  it("leave producers and stats the lock", function()
    env:config("concurrency = 8, busy_timeout = 2")
    env:script("qi.long", [[return function() os.execute("sleep 0.01") end]])
    env:script("qi.other", "return function() end")
    assert.are.equal(0, select(3, env:cli("migrate")))
    env:exec([[WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n
      WHERE i < 100000) INSERT INTO queues (name) SELECT 'idle.' || i FROM n]])
    local q = client(env)
    local jobs = {}
    for i = 1, 1500 do jobs[i] = { "qi.long", {} } end
    assert(q:push_many(jobs))
    q:close()
    env:start()
    local failed = {}
    jr.wait_for(function()
      for _, args in ipairs({ { "push", "qi.other", "{}" }, { "stats" } }) do
        local _, err, code = env:cli(table.unpack(args))
        if code ~= 0 then failed[#failed + 1] = args[1] .. ": " .. err end
      end
      return #failed > 0 or env:count() == 0
    end, 90, "drained, or a call failed")
    assert.are.same({}, failed)
  end)
end)

-- schedule_controls_spec.lua - pausing, resuming and firing one schedule
-- by hand, on each backend (docs/schedules.md, "Pause, resume, fire
-- now"): a paused schedule does not fire, a resumed one fires again and
-- never the instants of its paused time (catch_up "all" and a restart
-- included); a fire asked for by hand goes through the fires table and
-- makes exactly one job, with two runners and two requests for the same
-- instant; the CLI, the HTTP API (token required), the Lua control
-- module and SQL; bad input named.
local jr = require "jr"
local H = require "jrhttp"
local cjson = require "cjson"

local function count(env, name)
  return env:query(("SELECT count(*) AS n FROM jobs WHERE name = '%s'")
    :format(name))[1].n
end

local function ok_cli(env, ...)
  local out, err, code = env:cli(...)
  assert.equal(0, code, out .. err)
  return out
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": schedule controls", function()
    local env = jr.test_env(backend)

    it("a paused schedule does not fire; a resumed one skips its paused time", function()
      env:script("tick", "return function() end")
      env:config('retention = { completed = "1h" }, schedules = {' ..
        ' { name = "fast", every = "1s", job = "tick", catch_up = "all" } }')
      env:start()
      jr.wait_for(function() return count(env, "tick") >= 2 end, 20, "fires")
      assert.matches("paused schedule 'fast'", ok_cli(env, "schedule", "pause", "fast"))
      jr.wait_for(function() return env:log():find("schedule 'fast' paused") end,
        10, "the runner saw the pause")
      jr.sleep(1.2)              -- a fire already in its cycle may land
      local n = count(env, "tick")
      jr.sleep(3)
      assert.equal(n, count(env, "tick"))
      local out = ok_cli(env, "schedules")
      assert.matches("paused since", out)
      assert.is_true(cjson.decode(ok_cli(env, "schedules", "--json")).schedules[1].paused)
      -- resumed while no runner runs: the restart catches up nothing of
      -- the paused time (catch_up "all" would run every missed second)
      env:stop()
      jr.sleep(2)
      assert.matches("resumed schedule 'fast'", ok_cli(env, "schedule", "resume", "fast"))
      local t0 = jr.now()
      env:start()
      jr.wait_for(function() return count(env, "tick") >= n + 2 end, 20,
        "fires after the resume")
      local elapsed = jr.now() - t0
      assert.is_true(count(env, "tick") - n <= elapsed + 2,
        ("%d fires in %.1fs: the paused time was caught up"):format(
          count(env, "tick") - n, elapsed))
      -- only the instants since the resume count as missed (the runner
      -- started after it), never the paused time's
      local missed = tonumber(env:log():match(
        "schedule 'fast': (%d+) fires? missed since the last one") or 0)
      assert.is_true(missed <= elapsed + 1, missed .. " missed")
      -- pausing a paused schedule, resuming a running one: no-ops
      ok_cli(env, "schedule", "resume", "fast")
      env:stop()
    end)

    it("fire now makes exactly one job, with two runners and two requests", function()
      env:script("report", "return function() end")
      local extra = 'retention = { completed = "1h" }, schedules = {' ..
        ' { name = "report", every = "1d", payload = { n = 7 } } }'
      env:config(extra .. (", pid_file = %q"):format(env.dir .. "/second.pid"))
      local first = env.config_file
      env.config_file = env.dir .. "/second.lua"
      os.rename(first, env.config_file)
      env:start()
      env:config(extra)
      assert.equal(first, env.config_file)
      env:start()
      local at = math.floor(jr.now())
      local cmd = ("%s -c %s schedule fire report --at @%d"):format(
        jr.quote(jr.bin), jr.quote(env.config_file), at)
      jr.sh(("(%s >/dev/null 2>&1 & %s >/dev/null 2>&1; wait)"):format(cmd, cmd))
      jr.wait_for(function() return count(env, "report") == 1 end, 10, "the fire")
      jr.sleep(2.5)             -- both runners read the ask more than once
      local rows = env:jobs("name = 'report'")
      assert.equal(1, #rows)
      assert.equal(7, cjson.decode(rows[1].payload).n)
      assert.is_true(math.abs(rows[1].run_at - at) < 0.001)
      -- an ask older than the fire: nothing more
      ok_cli(env, "schedule", "fire", "report", "--at", "@" .. at)
      jr.sleep(1.5)
      assert.equal(1, count(env, "report"))
      local j = cjson.decode(ok_cli(env, "schedules", "--json")).schedules[1]
      assert.equal(rows[1].id, j.last_fire.job_id)
      env:stop(nil, env.procs[1])
      env:stop(nil, env.procs[2])
    end)

    it("the HTTP API follows the schedules of a reload", function()
      env:script("report", "return function() end")
      local base = H.start(env, 'schedules = { { name = "report", cron = "0 6 * * *" } }')
      assert.equal("report", H.json(base .. "/api/schedules").schedules[1].name)
      env:config(('http = { listen = "127.0.0.1:0", token = %q },'):format(H.TOKEN) ..
        ' schedules = { { name = "weekly", job = "report", cron = "0 7 * * 1" } }')
      ok_cli(env, "reload")
      jr.wait_for(function()
        return env:log():find("reload: schedules: 1 added, 0 changed, 1 removed")
      end, 15, "reload logged")
      local l = H.json(base .. "/api/schedules").schedules
      assert.equal(1, #l)
      assert.equal("weekly", l[1].name)
      assert.equal("0 7 * * 1", l[1].cron)
      local r = H.json(base .. "/api/schedules/weekly/pause", 200, { method = "POST" })
      assert.same({ schedule = "weekly", changed = true, paused = true }, r)
      local code, text = H.req(base .. "/api/schedules/report/pause", { method = "POST", token = true })
      assert.equal(404, code)
      assert.matches("no schedule 'report'", text)
      assert.equal(0, env:stop())
    end)

    it("the HTTP API lists, pauses, resumes and fires, with the token", function()
      env:script("report", "return function() end")
      local base = H.start(env, 'retention = { completed = "1h" }, schedules = {' ..
        ' { name = "report", cron = "0 6 * * 1-5", tz = "Europe/Paris",' ..
        ' catch_up = "none" } }')
      local l = H.json(base .. "/api/schedules")
      local s = l.schedules[1]
      assert.equal("report", s.name)
      assert.equal("0 6 * * 1-5", s.cron)
      assert.equal(cjson.null, s.every)
      assert.equal("Europe/Paris", s.tz)
      assert.equal("none", s.catch_up)
      assert.is_false(s.paused)
      assert.equal(cjson.null, s.last_fire)
      assert.equal(3, #s.next)
      assert.is_true(s.next[1] > l.now and s.next[1] < s.next[2])
      -- two requests for one instant: one job
      local at = math.floor(jr.now())
      local body = ('{"at": %d}'):format(at)
      local curl = ("curl -s -o /dev/null -X POST -H %s -H %s --data-binary %s %s")
        :format(jr.quote("Authorization: Bearer " .. H.TOKEN),
          jr.quote("Content-Type: application/json"), jr.quote(body),
          jr.quote(base .. "/api/schedules/report/fire"))
      jr.sh(("(%s & %s; wait)"):format(curl, curl))
      jr.wait_for(function() return count(env, "report") == 1 end, 10, "the fire")
      local r = H.json(base .. "/api/schedules/report/fire", 202,
        { method = "POST", body = body })
      assert.is_false(r.asked)          -- already asked for: no new job
      assert.equal(at, r.at)
      jr.sleep(1.5)
      assert.equal(1, count(env, "report"))
      s = H.json(base .. "/api/schedules").schedules[1]
      assert.equal(at, s.last_fire)
      assert.equal(env:jobs("name = 'report'")[1].id, s.last_job)
      -- pause and resume
      r = H.json(base .. "/api/schedules/report/pause", 200, { method = "POST" })
      assert.same({ schedule = "report", changed = true, paused = true }, r)
      r = H.json(base .. "/api/schedules/report/pause", 200, { method = "POST" })
      assert.is_false(r.changed)
      assert.is_true(H.json(base .. "/api/schedules").schedules[1].paused)
      local code, text = H.req(base .. "/api/schedules/report/fire",
        { method = "POST", token = true })
      assert.equal(409, code)
      assert.matches("schedule 'report' is paused: resume it first", text)
      r = H.json(base .. "/api/schedules/report/resume", 200, { method = "POST" })
      assert.same({ schedule = "report", changed = true, paused = false }, r)
      -- bad input and no token
      code, text = H.req(base .. "/api/schedules/nope/pause", { method = "POST", token = true })
      assert.equal(404, code)
      assert.matches("no schedule 'nope'", text)
      code, text = H.req(base .. "/api/schedules/report/fire",
        { method = "POST", token = true, body = '{"at": -5}' })
      assert.equal(400, code)
      assert.matches("'at' must be epoch seconds", text)
      code, text = H.req(base .. "/api/schedules/report/fire",
        { method = "POST", token = true, body = ('{"at": %d}'):format(at + 3600) })
      assert.equal(400, code)
      assert.matches("within 60 s of now", text)
      code = H.req(base .. "/api/schedules/report/pause", { method = "POST" })
      assert.equal(401, code)
      assert.is_false(H.json(base .. "/api/schedules").schedules[1].paused)
      env:stop()
    end)

    it("the CLI, the Lua control module and SQL act on the same controls", function()
      env:script("report", "return function() end")
      env:config('retention = { completed = "1h" }, schedules = {' ..
        ' { name = "report", every = "1d" } }')
      local out, err, code = env:cli("schedule", "pause", "nope")
      assert.equal(2, code, out)
      assert.matches("schedule 'nope' is not in .*jobrunner.lua %(schedules: report%)", err)
      out, err, code = env:cli("schedule", "fire", "report", "--at", "soon")
      assert.equal(2, code, out)
      assert.matches("%-%-at", err)
      local q = jr.client(env)
      assert.is_true(q:schedule_pause("report"))
      local paused = env:query("SELECT paused FROM schedules WHERE name = 'report'")
      assert.is_truthy(paused[1].paused == 1 or paused[1].paused == true)
      local ok, msg = q:schedule_fire("report")
      assert.is_nil(ok)
      assert.matches("schedule 'report' is paused: resume it first", msg)
      out, err, code = env:cli("schedule", "fire", "report")
      assert.equal(2, code, out)
      assert.matches("is paused", err)
      assert.is_true(q:schedule_resume("report"))
      local bad
      bad, msg = q:schedule_pause("no spaces")
      assert.is_nil(bad)
      assert.matches("schedule name", msg)
      env:start()
      local at = assert(q:schedule_fire("report"))
      assert.equal(math.floor(at), at)
      jr.wait_for(function() return count(env, "report") == 1 end, 10, "the fire")
      if backend == "postgres" then
        env:exec("SELECT pause_schedule('report')")
        assert.is_true(cjson.decode(ok_cli(env, "schedules", "--json")).schedules[1].paused)
        env:exec("SELECT resume_schedule('report')")
        env:exec("SELECT fire_schedule('report', now() + interval '2 seconds')")
      else
        env:exec("INSERT INTO schedules (name, fire_at) VALUES ('report'," ..
          " (julianday('now') - 2440587.5) * 86400.0 + 2)" ..
          " ON CONFLICT (name) DO UPDATE SET fire_at = excluded.fire_at")
      end
      jr.wait_for(function() return count(env, "report") == 2 end, 10,
        "the fire asked in SQL")
      q:close()
      env:stop()
    end)
  end)
end

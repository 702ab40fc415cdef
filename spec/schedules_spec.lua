-- schedules_spec.lua - recurring jobs: `schedules` in the config fire
-- ordinary jobs (run_at = the fire instant), exactly once per instant
-- whatever the number of runners, catch up after downtime as catch_up
-- says, follow the config on reload, show in `jobrunner schedules`; bad
-- schedules are refused with file:line and the field at fault.
local jr = require "jr"
local cjson = require "cjson"

-- A handler recording "NAME RUN_AT payload.v QUEUE PRIORITY" for each
-- job it runs.
local RECORDER = jr.RECORD .. [[
  return function(job)
    record("fired", ("%s %d %s %s %d"):format(job.name,
      math.floor(job.run_at + 0.5), tostring(job.payload.v or "-"),
      job.queue, job.priority))
  end
]]

-- The recorded fires: { [name] = { run_at, ... } sorted } and the lines.
local function fires(env)
  local by, lines = {}, jr.lines(env.dir .. "/fired")
  for _, l in ipairs(lines) do
    local name, at = l:match("^(%S+) (%d+)")
    by[name] = by[name] or {}
    table.insert(by[name], tonumber(at))
  end
  for _, t in pairs(by) do table.sort(t) end
  return by, lines
end

local function count(t) return t and #t or 0 end

-- Asserts t holds consecutive multiples of step, each once.
local function assert_consecutive(t, step, what)
  for i = 2, #t do
    assert(t[i] == t[i - 1] + step, ("%s: %d then %d (want +%d): %s"):format(
      what, t[i - 1], t[i], step, table.concat(t, " ")))
  end
end

-- Writes the config of the n-th runner: its own pid file (SQLite's
-- default pid file is per database) and extra.
local function config(env, extra, n)
  env:config(("concurrency = 1, poll_interval = 0.2, pid_file = %q, %s")
    :format(("%s/r%d.pid"):format(env.dir, n or 1), extra))
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": schedules", function()
    local env = jr.test_env(backend)

    it("fire each instant exactly once across three runners, as ordinary jobs", function()
      local list = {}
      for i = 1, 8 do
        list[#list + 1] = ('{ name = "s%d", every = "1s", job = "tick", ' ..
          'payload = { v = "s%d" } }'):format(i, i)
      end
      list[#list + 1] = '{ name = "with.options", every = 1, job = "tick",' ..
        ' payload = { v = "p" }, queue = "sched", priority = 3 }'
      list[#list + 1] = '{ name = "ghost", every = "1s" }'
      local schedules = "schedules = { " .. table.concat(list, ", ") .. " }"
      env:script("tick", (RECORDER:gsub("job%.name",
        "job.payload.v == 'p' and 'payload' or 'tick'")))
      local p = {}
      for n = 1, 3 do
        config(env, schedules, n)
        p[n] = env:start()
      end
      jr.wait_for(function()
        return #jr.lines(env.dir .. "/fired") >= 27
      end, 20, "27 fires")
      for n = 1, 3 do env:stop("TERM", p[n]) end
      -- every instant of each schedule once, none skipped, on any runner
      local seen = {}
      for _, j in ipairs(env:query("SELECT schedule, " .. (backend == "postgres"
          and "extract(epoch FROM fire_at)::float8" or "fire_at") ..
          " AS at, job_id FROM schedule_fires")) do
        local key = j.schedule .. "@" .. math.floor(j.at)
        assert.is_nil(seen[key], "fire recorded twice: " .. key)
        seen[key] = true
      end
      local by, lines = fires(env)
      local once = {}
      for _, l in ipairs(lines) do
        assert.is_nil(once[l], "ran twice: " .. l)
        once[l] = true
      end
      -- 9 schedules of job tick (8 plain, 1 with options) fire each second:
      -- per instant 8 plain ones (the last instant's may not have run yet)
      local per = {}
      for _, at in ipairs(by.tick or {}) do per[at] = (per[at] or 0) + 1 end
      local ats = {}
      for at in pairs(per) do ats[#ats + 1] = at end
      table.sort(ats)
      for i = 1, #ats - 1 do
        assert.are.equal(8, per[ats[i]], "plain fires at " .. ats[i])
      end
      assert_consecutive(ats, 1, "plain fires")
      assert_consecutive(by.payload, 1, "payload fires")
      assert.is_true(#lines >= 27)
      assert.is_true(#ats >= 3)
      -- an ordinary job: its payload, queue and priority
      for _, l in ipairs(lines) do
        if l:match("^payload") then
          assert.matches("^payload %d+ p sched 3$", l)
        else
          assert.matches("^tick %d+ s%d default 0$", l)
        end
      end
      -- a schedule without a handler: said at start; its jobs wait
      for n = 1, 3 do
        assert.matches("schedule 'ghost': no handler for job 'ghost'",
          env:log(p[n]))
      end
      local ghosts = env:jobs("name = 'ghost'")
      assert.is_true(#ghosts >= 2)
      for _, j in ipairs(ghosts) do assert.are.equal("queued", j.state) end
    end)

    it("catch up after downtime: last (default), all, none", function()
      local now = math.floor(jr.now())
      local L = (now // 60) * 60 - 600   -- the last fire, 10 minutes ago
      local at = backend == "postgres" and ("to_timestamp(%d)"):format(L) or
        tostring(L)
      env:script("tick", RECORDER)
      config(env, [[schedules = {
        { name = "lastm", every = "1m", job = "tick", payload = { v = "last" } },
        { name = "allm", every = "1m", job = "tick", catch_up = "all",
          payload = { v = "all" } },
        { name = "nonem", every = "1m", job = "tick", catch_up = "none",
          payload = { v = "none" } },
        { name = "paris", cron = "0 6 * * *", tz = "Europe/Paris", job = "tick" },
        { name = "secs", every = "1s", job = "tick", catch_up = "all",
          payload = { v = "secs" } } }]])
      local _, err, code = env:cli("migrate")
      assert.are.equal(0, code, err)
      for _, s in ipairs({ "lastm", "allm", "nonem" }) do
        env:exec(("INSERT INTO schedule_fires (schedule, fire_at) VALUES ('%s', %s)")
          :format(s, at))
      end
      env:start()
      local function runs(v)
        local t = {}
        for _, l in ipairs(jr.lines(env.dir .. "/fired")) do
          local a, pv = l:match("^tick (%d+) (%S*)")
          if pv == v then t[#t + 1] = tonumber(a) end
        end
        table.sort(t)
        return t
      end
      jr.wait_for(function()
        return #runs("all") >= 10 and #runs("last") >= 1 and #runs("secs") >= 1
      end, 20, "catch-up fires")
      -- all: every missed minute once, from the one after the last fire
      local all = runs("all")
      assert.are.equal(L + 60, all[1])
      assert_consecutive(all, 60, "all")
      local M = L + 600
      assert.is_true(all[#all] >= M)
      -- last: only the most recent missed one; none: none of them
      for _, a in ipairs(runs("last")) do assert.is_true(a >= M) end
      for _, a in ipairs(runs("none")) do assert.is_true(a > M) end
      -- jobrunner schedules: the last fire, the next three in zone and UTC
      local out, err2, code2 = env:cli("schedules", "--json")
      assert.are.equal(0, code2, err2)
      local doc = cjson.decode(out)
      local by = {}
      for _, s in ipairs(doc.schedules) do by[s.name] = s end
      assert.are.equal("all", by.allm.catch_up)
      assert.are.equal(60, by.allm.every)
      assert.are.equal("Europe/Paris", by.paris.tz)
      assert.are.equal("0 6 * * *", by.paris.cron)
      assert.are.equal(cjson.null, by.paris.last_fire)
      assert.are.equal(3, #by.paris.next)
      for _, n in ipairs(by.paris.next) do
        local off = n["local"]:match("T06:00:00%+(0[12]):00$")
        assert.is_truthy(off, n["local"])
        assert.matches(off == "01" and "T05:00:00" or "T04:00:00", n.utc)
      end
      assert.is_truthy(by.allm.last_fire.job_id > 0)
      assert.matches("^%d%d%d%d%-", by.allm.last_fire.utc)
      local text = env:cli("schedules")
      assert.matches("paris: 0 6 %* %* %*, zone Europe/Paris", text)
      assert.matches("last fire: never", text)
      -- the runner is down for over a second: catch_up = "all" fires every
      -- missed second once, and none twice (their jobs are gone by now)
      env:stop()
      local down = jr.now()
      jr.wait_for(function() return jr.now() > down + 1.6 end, 5)
      env:start()
      jr.wait_for(function()
        local s = runs("secs")
        return s[#s] and s[#s] > down + 1.6
      end, 20, "fires after the restart")
      env:stop()
      local secs = runs("secs")
      assert_consecutive(secs, 1, "secs across the restart")
      assert.is_true(secs[1] < down and secs[#secs] > down + 1.6)
    end)

    it("follow the config on reload: added, removed, changed", function()
      env:script("tick", RECORDER)
      local function with(list)
        config(env, "schedules = { " .. list .. " }")
      end
      with('{ name = "gone", every = "1s", job = "tick", payload = { v = "gone" } },' ..
        ' { name = "kept", every = "1s", job = "tick", payload = { v = "one" } }')
      env:start()
      local function last(v)
        local n, max = 0, 0
        for _, l in ipairs(jr.lines(env.dir .. "/fired")) do
          local a, pv = l:match("^tick (%d+) (%S*)")
          if pv == v then n, max = n + 1, math.max(max, tonumber(a)) end
        end
        return n, max
      end
      jr.wait_for(function() return last("gone") >= 1 and last("one") >= 1 end,
        15, "first fires")
      with('{ name = "kept", every = "1s", job = "tick", payload = { v = "two" } },' ..
        ' { name = "added", every = "1s", job = "tick", payload = { v = "new" } }')
      local _, err, code = env:cli("reload")
      assert.are.equal(0, code, err)
      jr.wait_for(function()
        return env:log():find("reload: schedules: 1 added, 1 changed, 1 removed")
      end, 15, "reload logged")
      local t = jr.now()
      jr.wait_for(function() return last("new") >= 1 and last("two") >= 1 end,
        15, "fires after the reload")
      local _, gone_max = last("gone")
      assert.is_true(gone_max <= t + 1, "removed schedule still fires")
      env:stop()
    end)
  end)
end

describe("schedules: bad input", function()
  local env = jr.test_env("sqlite")

  -- Runs check on a config with these schedules; returns status, stderr.
  local function check(extra)
    env:config(extra)
    local _, err, code = env:cli("check")
    return code, err
  end

  local cases = {
    { "61 * * * *", "field 'minute' %(1st%): 61 is out of range 0%-59" },
    { "* * *", "expected 5 fields" },
    { "0 6 * * 8", "field 'day%-of%-week' %(5th%): 8 is out of range 0%-7" },
  }
  for _, c in ipairs(cases) do
    it("refuses cron '" .. c[1] .. "' naming file:line, the schedule and the field", function()
      local code, err = check(('schedules = {\n  { name = "a",\n    cron = %q } }')
        :format(c[1]))
      assert.are.equal(3, code)
      assert.matches("jobrunner.lua:6: schedule 'a': 'cron' is invalid", err)
      assert.matches(c[2], err)
    end)
  end

  it("refuses an unknown zone, in a schedule or as the default", function()
    local code, err = check('schedules = {\n  { name = "a", every = "1m",\n' ..
      '    tz = "Mars/Olympus_Mons" } }')
    assert.are.equal(3, code)
    assert.matches("jobrunner.lua:6: schedule 'a': 'tz' 'Mars/Olympus_Mons' " ..
      "is not a time zone of the tz database", err)
    code, err = check('timezone = "Europe/Nowhere"')
    assert.are.equal(3, code)
    assert.matches("jobrunner.lua:4: 'timezone' 'Europe/Nowhere' is not a time zone", err)
  end)

  it("refuses every = '0s', two schedules with one name, a missing cron", function()
    local code, err = check('schedules = { { name = "a", every = "0s" } }')
    assert.are.equal(3, code)
    assert.matches("schedule 'a': 'every' is 0s: must be whole seconds", err)
    code, err = check('schedules = {\n  { name = "a", every = "1m" },\n' ..
      '  { name = "a", cron = "@daily" } }')
    assert.are.equal(3, code)
    assert.matches("jobrunner.lua:6: schedule 'a': 'name' is used by two schedules", err)
    code, err = check('schedules = { { name = "a" } }')
    assert.are.equal(3, code)
    assert.matches("schedule 'a': 'cron' is missing: set 'cron' or 'every'", err)
    code, err = check('schedules = { { name = "a", every = "1m", catch_up = "some" } }')
    assert.are.equal(3, code)
    assert.matches("'catch_up' must be \"last\", \"all\" or \"none\"", err)
    code, err = check('schedules = { { name = "a", every = "1m", colour = 1 } }')
    assert.are.equal(3, code)
    assert.matches("'colour' is not a schedule field", err)
  end)

  it("warns in check of a cron that never fires, naming file:line and the schedule", function()
    env:script("here", "return function() end")
    local code, err = check('schedules = {\n  { name = "ok", every = "1m", job = "here" },\n' ..
      '  { name = "feb", cron = "* * 31 2 *" } }')
    assert.are.equal(0, code, err)
    assert.matches("jobrunner.lua:6: warning: schedule 'feb': '* * 31 2 *' never fires",
      err, 1, true)
    assert.is_nil(err:find("schedule 'ok'"))
  end)

  it("warns in check of a schedule whose handler does not exist", function()
    env:script("here", "return function() end")
    local code, err = check('schedules = {\n  { name = "here", every = "1m" },\n' ..
      '  { name = "missing", every = "1m" } }')
    assert.are.equal(0, code, err)
    assert.matches("jobrunner.lua:6: warning: schedule 'missing': no handler " ..
      "for job 'missing'", err)
    assert.is_nil(err:find("schedule 'here'"))
  end)
end)

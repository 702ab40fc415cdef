-- schedule_runtime_spec.lua - schedules managed at run time, on each
-- backend (docs/schedules.md, "Schedules managed at run time"): added,
-- changed and removed by the CLI, the Lua module (the C library's calls)
-- and the HTTP API, followed by two runners with each fire pushed once; a
-- name of the config refused (at add, and a runner does not start on
-- one); overlap skip, allow and cancel_previous; jitter the same for
-- every runner and below its bound; start_at/end_at; backfill pushes each
-- missed fire once, twice nothing more; bad input named.
local jr = require "jr"
local H = require "jrhttp"
local cjson = require "cjson"

local function count(env, name, where)
  return tonumber(env:query(("SELECT count(*) AS n FROM jobs WHERE name = '%s'%s")
    :format(name, where and (" AND " .. where) or ""))[1].n)
end

local function fires(env, name)
  local at = env.backend == "postgres" and "extract(epoch FROM fire_at)::float8"
    or "fire_at"
  local rows = env:query(("SELECT %s AS at, job_id FROM schedule_fires" ..
    " WHERE schedule = '%s' ORDER BY fire_at"):format(at, name))
  for _, r in ipairs(rows) do
    r.at = tonumber(r.at)
    if r.job_id == cjson.null then r.job_id = nil end
  end
  return rows
end

local function ok_cli(env, ...)
  local out, err, code = env:cli(...)
  assert.equal(0, code, out .. err)
  return out
end

local function bad_cli(env, pattern, ...)
  local out, err, code = env:cli(...)
  assert.equal(2, code, out .. err)
  assert.matches(pattern, err)
  return err
end

-- The jitter of schedule name's fire at instant at, as the runner
-- computes it: FNV-1a of the name and "@%.3f" of the instant, modulo the
-- jitter in milliseconds (unsigned).
local function jitter_of(name, at, jitter)
  local h = -3750763034362895579        -- 14695981039346656037
  local text = name .. ("@%.3f"):format(at)
  for i = 1, #text do
    h = (h ~ text:byte(i)) * 1099511628211
  end
  local m = math.floor(jitter * 1000)
  local q = ((h >> 1) // m) << 1
  local r = h - q * m
  while not math.ult(r, m) do r = r - m end
  return r / 1000
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": schedules managed at run time", function()
    local env = jr.test_env(backend)

    it("two runners follow an add, a set and a remove; each fire pushed once", function()
      env:script("tick", "return function() end")
      local extra = 'retention = { completed = "1h" }'
      env:config(extra .. (", pid_file = %q"):format(env.dir .. "/second.pid"))
      local first = env.config_file
      env.config_file = env.dir .. "/second.lua"
      os.rename(first, env.config_file)
      local p1 = env:start()
      env:config(extra)
      local p2 = env:start()
      jr.wait_for(function()
        return env:log(p1):find("started") and env:log(p2):find("started")
      end, 20, "both runners")
      assert.matches("schedule 'rt' added", ok_cli(env, "schedule", "add", "rt",
        "--every", "1s", "--job", "tick", "--payload", '{"v": 1}'))
      jr.wait_for(function() return count(env, "tick") >= 3 end, 20, "fires")
      for _, p in ipairs({ p1, p2 }) do
        jr.wait_for(function()
          return env:log(p):find("run%-time change: schedules: 1 added")
        end, 10, "each runner follows the add")
      end
      ok_cli(env, "schedule", "set", "rt", "--payload", '{"v": 2}')
      jr.wait_for(function()
        return count(env, "tick", backend == "postgres" and "payload->>'v' = '2'"
          or "json_extract(payload, '$.v') = 2") >= 2
      end, 20, "fires of the changed payload")
      for _, p in ipairs({ p1, p2 }) do
        jr.wait_for(function()
          return env:log(p):find("run%-time change: schedules: 0 added, 1 changed")
        end, 10, "each runner follows the set")
      end
      ok_cli(env, "schedule", "remove", "rt")
      for _, p in ipairs({ p1, p2 }) do
        jr.wait_for(function()
          return env:log(p):find("run%-time change: schedules: 0 added, 0 changed, 1 removed")
        end, 10, "each runner follows the remove")
      end
      jr.sleep(1.2)             -- a fire already in its cycle may land
      local n = count(env, "tick")
      jr.sleep(2)
      assert.equal(n, count(env, "tick"))
      -- one job per fire instant, across the two runners
      local f = fires(env, "rt")
      local seen = {}
      for _, r in ipairs(f) do
        assert.is_nil(seen[r.at])
        seen[r.at] = true
      end
      assert.equal(n, #env:jobs("name = 'tick'"))
      local runs = {}
      for _, j in ipairs(env:jobs("name = 'tick'")) do
        assert.is_nil(runs[j.run_at], "two jobs for one instant")
        runs[j.run_at] = true
      end
      env:stop(nil, p1)
      env:stop(nil, p2)
    end)

    it("a name of the config is refused at add, set and remove, and at start", function()
      env:script("tick", "return function() end")
      env:config('schedules = { { name = "nightly", cron = "0 3 * * *", job = "tick" } }')
      ok_cli(env, "migrate")
      bad_cli(env, "schedule 'nightly' is in the config file: it is read%-only here",
        "schedule", "add", "nightly", "--every", "1s")
      bad_cli(env, "schedule 'nightly' is in the config file", "schedule", "set",
        "nightly", "--every", "1s")
      bad_cli(env, "schedule 'nightly' is in the config file", "schedule", "remove",
        "nightly")
      -- added while the config did not hold it: the runner refuses to start
      env:config("")
      ok_cli(env, "schedule", "add", "nightly", "--cron", "0 4 * * *", "--job", "tick")
      env:config('schedules = { { name = "nightly", cron = "0 3 * * *", job = "tick" } }')
      env:start()
      local code = env:stop(nil, nil, 40)
      assert.is_true(code ~= 0)
      assert.matches("schedule 'nightly' is in the config and was added at run time",
        env:log())
      -- a reload that brings the name: the config's is followed, said
      env:config("")
      local p = env:start()
      jr.wait_for(function()
        return env:log(p):find("run%-time change: schedules: 1 added")
      end, 10, "the run-time one followed")
      env:config('schedules = { { name = "nightly", cron = "0 3 * * *", job = "tick" } }')
      ok_cli(env, "reload")
      jr.wait_for(function()
        return env:log(p):find("reload: schedule 'nightly' is in the config and was " ..
                               "added at run time: the config's is followed")
      end, 15, "the reload's error")
      assert.equal(0, env:stop(nil, p))
      env:config("")
      ok_cli(env, "schedule", "remove", "nightly")
      bad_cli(env, "no schedule 'nightly' added at run time", "schedule", "remove",
        "nightly")
    end)

    it("bad input is named", function()
      env:config("")
      ok_cli(env, "migrate")
      bad_cli(env, "'cron' is invalid: .*61 is out of range", "schedule", "add", "b",
        "--cron", "61 * * * *")
      bad_cli(env, "'every' must be seconds or a duration", "schedule", "add", "b", "--every", "1x")
      bad_cli(env, "'jitter' must be from 0 to 86400", "schedule", "add", "b",
        "--every", "1s", "--jitter", "2d")
      bad_cli(env, "'jitter' must be seconds or a duration", "schedule", "add", "b",
        "--every", "1s", "--jitter", "soon")
      bad_cli(env, "'overlap' must be \"skip\", \"allow\" or \"cancel_previous\"",
        "schedule", "add", "b", "--every", "1s", "--overlap", "never")
      bad_cli(env, "'end_at' must be after start_at", "schedule", "add", "b",
        "--every", "1s", "--start-at", "2030-01-02T00:00:00Z", "--end-at",
        "2030-01-01T00:00:00Z")
      bad_cli(env, "'start_at' must be a time", "schedule", "add", "b", "--every",
        "1s", "--start-at", "tomorrow")
      bad_cli(env, "schedule name", "schedule", "add", "a\1b", "--every", "1s")
      bad_cli(env, "schedule name", "schedule", "add", ("x"):rep(200), "--every", "1s")
      bad_cli(env, "%-%-priority", "schedule", "add", "b", "--every", "1s",
        "--priority", "99999999999")
      bad_cli(env, "%-%-payload is not JSON", "schedule", "add", "b", "--every", "1s",
        "--payload", '{"a":')
      bad_cli(env, "'payload' must be a table", "schedule", "add", "b", "--every", "1s",
        "--payload", '"text"')
      bad_cli(env, "unknown option '%-%-nope'", "schedule", "add", "b", "--nope", "1")
      bad_cli(env, "is missing: set 'cron' or 'every'", "schedule", "add", "b")
      bad_cli(env, "no schedule 'nope' added at run time", "schedule", "backfill",
        "nope", "@1", "@2")
      ok_cli(env, "schedule", "add", "ok1", "--every", "1h")
      bad_cli(env, "backfill: TO is in the future", "schedule", "backfill", "ok1",
        "@1", "@99999999999")
      bad_cli(env, "backfill: FROM is after TO", "schedule", "backfill", "ok1",
        "@20", "@10")
      bad_cli(env, "FROM", "schedule", "backfill", "ok1", "yesterday", "@10")
      ok_cli(env, "schedule", "remove", "ok1")
      assert.equal(0, #env:query("SELECT name FROM schedule_defs"))
      -- the config's schedules take the same fields, read by the same reader
      env:config('schedules = { { name = "c1", every = "1h",\n' ..
                 '  overlap = "never" } }')
      local out, err, code = env:cli("check")
      assert.equal(3, code, out .. err)
      assert.matches(("jobrunner.lua:%d: schedule 'c1': 'overlap' must be"):format(
        jr.line_of(env, 'overlap = "never"')), err)
      env:config('schedules = { { name = "c1", every = "1h", overlap = "skip",' ..
                 ' jitter = 5, start_at = "2030-01-01T00:00:00Z" } }')
      assert.matches("next fires: 2030%-01%-01T00:00:00", ok_cli(env, "schedules"))
    end)

    it("overlap: skip, allow and cancel_previous while the previous job waits", function()
      -- no handler for 'slow': each fire's job stays queued (not ended)
      env:config('retention = { completed = "1h" }')
      env:start()
      ok_cli(env, "schedule", "add", "skip", "--every", "1s", "--job", "slow",
        "--queue", "q1", "--overlap", "skip")
      ok_cli(env, "schedule", "add", "allow", "--every", "1s", "--job", "slow",
        "--queue", "q2")
      ok_cli(env, "schedule", "add", "cancel", "--every", "1s", "--job", "slow",
        "--queue", "q3", "--overlap", "cancel_previous")
      jr.wait_for(function()
        return #fires(env, "skip") >= 3 and #fires(env, "cancel") >= 3
          and #fires(env, "allow") >= 3
      end, 20, "three fires of each")
      env:stop()
      local f = fires(env, "skip")
      assert.is_not_nil(f[1].job_id)
      for i = 2, #f do assert.is_nil(f[i].job_id, "a skipped fire has no job") end
      assert.equal(1, count(env, "slow", "queue = 'q1'"))
      assert.matches("the fire at .* is skipped: job %d+ of the fire before has not ended",
        env:log())
      f = fires(env, "allow")
      for _, r in ipairs(f) do assert.is_not_nil(r.job_id) end
      assert.equal(#f, count(env, "slow", "queue = 'q2' AND state = 'queued'"))
      f = fires(env, "cancel")
      for _, r in ipairs(f) do assert.is_not_nil(r.job_id) end
      assert.equal(1, count(env, "slow", "queue = 'q3' AND state = 'queued'"))
      assert.equal(#f - 1, count(env, "slow", "queue = 'q3' AND state = 'cancelled'"))
    end)

    it("jitter is the same for every runner and below its bound; start_at and end_at bound the fires", function()
      env:config('retention = { completed = "1h" }')
      local now = math.floor(jr.now())
      local start, stop = now + 3, now + 5
      env:start()
      ok_cli(env, "schedule", "add", "jit", "--every", "1s", "--job", "j",
        "--jitter", "30s")
      ok_cli(env, "schedule", "add", "win", "--every", "1s", "--job", "w",
        "--start-at", "@" .. start, "--end-at", "@" .. stop)
      jr.wait_for(function() return #fires(env, "jit") >= 3 end, 20, "jittered fires")
      jr.wait_for(function() return jr.now() > stop + 2.5 end, 20, "the window's end")
      env:stop()
      local f = fires(env, "jit")
      for _, r in ipairs(f) do
        local job = env:jobs("id = " .. r.job_id)[1]
        local d = job.run_at - r.at
        assert.is_true(d >= 0 and d < 30, "delay " .. d)
        assert.is_true(math.abs(d - jitter_of("jit", r.at, 30)) < 0.002,
          ("delay %.3f, expected %.3f"):format(d, jitter_of("jit", r.at, 30)))
      end
      f = fires(env, "win")
      assert.is_true(#f >= 1 and #f <= 3, #f .. " fires")
      for _, r in ipairs(f) do
        assert.is_true(r.at >= start and r.at <= stop, "fire at " .. r.at)
      end
    end)

    it("backfill pushes each missed fire once; twice pushes nothing more", function()
      env:config("")
      ok_cli(env, "migrate")
      ok_cli(env, "schedule", "add", "bf", "--every", "1m", "--job", "b",
        "--payload", '{"k": 1}')
      local to = math.floor(jr.now() / 60) * 60 - 60
      local from = to - 9 * 60
      local out = ok_cli(env, "schedule", "backfill", "bf", "@" .. from, "@" .. to)
      assert.matches("pushed 10 jobs", out)
      assert.matches("pushed 0 jobs", ok_cli(env, "schedule", "backfill", "bf",
        "@" .. from, "@" .. to))
      assert.equal(10, count(env, "b"))
      local jobs = env:jobs("name = 'b'")
      table.sort(jobs, function(a, b) return a.run_at < b.run_at end)
      for i, j in ipairs(jobs) do
        assert.equal(from + (i - 1) * 60, j.run_at)
        assert.equal(1, cjson.decode(j.payload).k)
      end
      -- a wider window: only the instants not fired yet
      local q = jr.client(env)
      assert.equal(2, q:schedule_backfill("bf", from - 120, to))
      assert.equal(0, q:schedule_backfill("bf", from - 120, to))
      assert.equal(12, count(env, "b"))
      -- the newest fires are pruned (JR_FIRES_KEEP), never a backfill's
      assert.equal(12, #fires(env, "bf"))
      local n, msg = q:schedule_backfill("bf", 0, to)
      assert.is_nil(n)
      assert.matches("more than 1000 fires", msg)
      -- listed, and controlled, as a config's schedule
      local l = cjson.decode(ok_cli(env, "schedules", "--json")).schedules
      assert.equal(1, #l)
      assert.equal("bf", l[1].name)
      assert.matches("paused schedule 'bf'", ok_cli(env, "schedule", "pause", "bf"))
      assert.matches("pushed 0 jobs", ok_cli(env, "schedule", "backfill", "bf",
        "@" .. (from - 600), "@" .. (from - 180)))
    end)

    it("the Lua module (the library's calls) adds, sets and removes", function()
      env:config("max_payload = 100000")
      ok_cli(env, "migrate")
      local q = jr.client(env)
      assert.is_true(q:schedule_add("lua1", { cron = "*/5 * * * *", job = "x",
        payload = { a = 1 }, overlap = "skip", jitter = "10s" }))
      local ok, msg = q:schedule_add("lua1", { every = "1h" })
      assert.is_nil(ok)
      assert.matches("schedule 'lua1' exists", msg)
      assert.is_true(q:schedule_set("lua1", { every = "1h", jitter = require("jobrunner").null }))
      local def = cjson.decode(env:query("SELECT def FROM schedule_defs WHERE name = 'lua1'")[1].def)
      assert.equal("1h", def.every)
      assert.is_nil(def.cron)
      assert.is_nil(def.jitter)
      assert.equal("skip", def.overlap)
      ok, msg = q:schedule_set("lua1", '{"catch_up": "sometimes"}')
      assert.is_nil(ok)
      assert.matches("'catch_up' must be", msg)
      ok, msg = q:schedule_set("nope", { every = "1h" })
      assert.is_nil(ok)
      assert.matches("no schedule 'nope' added at run time", msg)
      ok, msg = q:schedule_add("big", { every = "1h", payload = { s = ("x"):rep(200000) } })
      assert.is_nil(ok)
      assert.matches("schedule 'big': 'payload' is %d+ bytes as JSON, over max_payload", msg)
      ok, msg = q:schedule_add("big", { every = "1h", payload = { s = ("x"):rep(1100000) } })
      assert.is_nil(ok)
      assert.matches("over 1048576 bytes", msg)
      ok, msg = q:schedule_add("big", { every = "1h", end_at = 1e300 })
      assert.is_nil(ok)
      assert.matches("'end_at' is out of range", msg)
      assert.is_true(q:schedule_remove("lua1"))
      assert.equal(0, #env:query("SELECT name FROM schedule_defs"))
      -- the list shows a run-time schedule beside the config's
    end)

    it("the HTTP API adds, changes, removes and backfills, with the token", function()
      env:script("tick", "return function() end")
      local base = H.start(env, 'schedules = { { name = "cfg", cron = "0 6 * * *", job = "tick" } }')
      local code, text = H.req(base .. "/api/schedules/web", { method = "POST",
        body = '{"every": "1h", "job": "tick"}' })
      assert.equal(401, code, text)
      local r = H.json(base .. "/api/schedules/web", 201, { method = "POST",
        body = '{"every": "1h", "job": "tick", "payload": {"x": "<b>"}}' })
      assert.equal("web", r.name)
      assert.equal("1h", r.definition.every)
      jr.wait_for(function()
        for _, s in ipairs(H.json(base .. "/api/schedules").schedules) do
          if s.name == "web" then return s end
        end
      end, 10, "the runner lists it")
      local s
      for _, x in ipairs(H.json(base .. "/api/schedules").schedules) do
        if x.name == "web" then s = x end
      end
      assert.equal("runtime", s.source)
      assert.equal("<b>", s.payload.x)
      r = H.json(base .. "/api/schedules/web", 200, { method = "PUT",
        body = '{"overlap": "cancel_previous"}' })
      assert.equal("cancel_previous", r.definition.overlap)
      code, text = H.req(base .. "/api/schedules/web", { method = "PUT", token = true,
        body = '{"jitter": "forever"}' })
      assert.equal(400, code)
      assert.matches("'jitter' must be seconds or a duration", text)
      code, text = H.req(base .. "/api/schedules/cfg", { method = "PUT", token = true,
        body = '{"every": "1s"}' })
      assert.equal(400, code)
      assert.matches("in the config file", text)
      local json = { "Content-Type: application/json" }
      code, text = H.req(base .. "/api/schedules/nope", { method = "DELETE", token = true,
        headers = json })
      assert.equal(404, code, text)
      code = H.req(base .. "/api/schedules/web", { method = "PATCH", token = true })
      assert.equal(405, code)
      local to = math.floor(jr.now() / 3600) * 3600 - 3600
      r = H.json(base .. "/api/schedules/web/backfill", 200, { method = "POST",
        body = ('{"from": %d, "to": "@%d"}'):format(to - 3600, to) })
      assert.equal(2, r.pushed)
      r = H.json(base .. "/api/schedules/web/backfill", 200, { method = "POST",
        body = ('{"from": %d, "to": %d}'):format(to - 3600, to) })
      assert.equal(0, r.pushed)
      code, text = H.req(base .. "/api/schedules/web/backfill", { method = "POST",
        token = true, body = '{"from": 1}' })
      assert.equal(400, code)
      assert.matches("'to' is missing", text)
      r = H.json(base .. "/api/schedules/web", 200, { method = "DELETE", headers = json })
      assert.is_true(r.removed)
      assert.equal(0, env:stop())
    end)
  end)
end

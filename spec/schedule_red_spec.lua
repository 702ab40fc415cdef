-- schedule_red_spec.lua - schedules managed at run time pushed where a
-- careless user or an attacker would, on each backend (docs/schedules.md,
-- "Overlap, jitter, start and end" and "Schedules managed at run time"):
-- a jitter below a millisecond (the runner divided by zero), the HTTP
-- API's writes after a reload brought a config name, the way out of a
-- name in both (the remove the runner's log asks for), a change naming
-- both cron and every (an option twice, a field to remove that is none),
-- a backfill from the epoch of a schedule starting now, fields given
-- null, the 1000th schedule raced for, a window before 1970, a NUL byte
-- in a name the Lua module takes, a start's log with none added.
local jr = require "jr"
local H = require "jrhttp"
local cjson = require "cjson"

local function ok_cli(env, ...)
  local out, err, code = env:cli(...)
  assert.equal(0, code, out .. err)
  return out
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

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": schedules managed at run time, red team", function()
    local env = jr.test_env(backend)

    it("a jitter below a millisecond delays nothing; the runner lives on", function()
      env:config('retention = { completed = "1h" },\n' ..
                 'schedules = { { name = "cfgj", every = "1s", job = "c",\n' ..
                 '  jitter = 0.0004 } }')
      local p = env:start()
      ok_cli(env, "schedule", "add", "rtj", "--every", "1s", "--job", "r",
        "--jitter", "0.0009")
      jr.wait_for(function()
        return #fires(env, "rtj") >= 2 and #fires(env, "cfgj") >= 2
          or not env:alive(p)
      end, 20, "fires of both")
      assert.is_true(env:alive(p), env:log(p))
      assert.equal(0, env:stop(nil, p))
      for _, name in ipairs({ "rtj", "cfgj" }) do
        for _, r in ipairs(fires(env, name)) do
          local job = env:jobs("id = " .. r.job_id)[1]
          assert.equal(r.at, job.run_at)
        end
      end
    end)

    it("the HTTP API refuses a name a reload brought; a name in both: the remove the log names takes its run-time copy", function()
      env:script("t", "return function() end")
      local base = H.start(env, "")
      local http = ('http = { listen = "127.0.0.1:0", token = %q }'):format(H.TOKEN)
      env:config(http .. ',\nschedules = { { name = "cfgr", every = "1h", job = "t" } }')
      ok_cli(env, "reload")
      jr.wait_for(function()
        return env:log():find("reload: schedules: 1 added")
      end, 15, "the reload")
      local url = base .. "/api/schedules/cfgr"
      for _, m in ipairs({ "POST", "PUT", "DELETE" }) do
        local code, text = H.req(url, { method = m, token = true,
          body = '{"every": "1s", "job": "t"}' })
        assert.equal(400, code, m .. " " .. text)
        assert.matches("schedule 'cfgr' is in the config file", text)
      end
      assert.equal(0, #env:query("SELECT name FROM schedule_defs"))
      -- the library reads no config: a name in both, the log says the way out
      local q = jr.client(env)
      for _, how in ipairs({ "cli", "http" }) do
        assert.is_true(q:schedule_add("cfgr", { every = "1s", job = "t" }))
        jr.wait_for(function()
          local _, n = env:log():gsub("schedule 'cfgr': in the config and added " ..
            "at run time: the config's is followed; remove one %(jobrunner " ..
            "schedule remove cfgr%)", "")
          return n >= (how == "cli" and 1 or 2)
        end, 15, "the runner names the way out")
        if how == "cli" then
          assert.matches("schedule 'cfgr' removed", ok_cli(env, "schedule", "remove", "cfgr"))
        else
          assert.is_true(H.json(url, 200, { method = "DELETE",
            headers = { "Content-Type: application/json" } }).removed)
        end
        assert.equal(0, #env:query("SELECT name FROM schedule_defs"))
      end
      local out, err, code = env:cli("schedule", "remove", "cfgr")
      assert.equal(2, code, out .. err)
      assert.matches("schedule 'cfgr' is in the config file", err)
      assert.equal(0, env:stop())
    end)

    it("a change naming both cron and every, a field given twice or an unknown field to remove is refused, named", function()
      env:config("")
      ok_cli(env, "migrate")
      ok_cli(env, "schedule", "add", "two", "--every", "1h", "--jitter", "5s")
      local function refused(pattern, ...)
        local out, err, code = env:cli(...)
        assert.equal(2, code, out .. err)
        assert.matches(pattern, err)
      end
      refused("schedule 'two': 'cron' and 'every' are both set: choose one",
        "schedule", "set", "two", "--cron", "*/5 * * * *", "--every", "1s")
      refused("schedule set: 'every' is given twice %(%-%-every, then %-%-every%)",
        "schedule", "set", "two", "--every", "1s", "--every", "2s")
      refused("schedule add: 'tz' is given twice %(%-%-timezone, then %-%-tz%)",
        "schedule", "add", "other", "--every", "1s", "--timezone", "UTC", "--tz", "UTC")
      refused("schedule set: 'jitter' is given twice %(%-%-jitter, then %-%-unset%)",
        "schedule", "set", "two", "--jitter", "1s", "--unset", "jitter")
      refused("schedule 'two': 'jiter' is not a field to remove %(valid: cron, every",
        "schedule", "set", "two", "--unset", "jiter")
      local q = jr.client(env)
      local ok, msg = q:schedule_set("two", { cron = "* * * * *", every = "1s" })
      assert.is_nil(ok)
      assert.matches("schedule 'two': 'cron' and 'every' are both set", msg)
      ok, msg = q:schedule_set("two", "{bad")
      assert.is_nil(ok)
      assert.matches("schedule 'two': the change is not JSON", msg)
      local def = cjson.decode(env:query("SELECT def FROM schedule_defs")[1].def)
      assert.same({ every = "1h", jitter = "5s" }, def)
      assert.is_nil(env:query("SELECT def FROM schedule_defs WHERE name = 'other'")[1])
      -- one of them alone replaces the other, as documented
      ok_cli(env, "schedule", "set", "two", "--cron", "*/5 * * * *", "--unset", "jitter")
      def = cjson.decode(env:query("SELECT def FROM schedule_defs")[1].def)
      assert.same({ cron = "*/5 * * * *" }, def)
    end)

    it("a backfill from the epoch of a schedule that starts now walks only its own instants", function()
      env:config("")
      ok_cli(env, "migrate")
      local now = math.floor(jr.now())
      ok_cli(env, "schedule", "add", "late", "--every", "1s", "--job", "l",
        "--start-at", "@" .. (now - 5))
      -- before, each second since 1970 was walked (a minute of CPU on a
      -- loaded machine, the HTTP API's database thread held as long)
      local out, err, code = jr.sh(("cd %s && timeout 8 %s -c %s schedule backfill late @1 @%d")
        :format(jr.quote(env.dir), jr.quote(jr.bin), jr.quote(env.config_file), now - 1))
      assert.equal(0, code, out .. err)
      assert.matches("pushed 5 jobs", out)
      ok_cli(env, "schedule", "add", "gone", "--every", "1s", "--job", "g",
        "--end-at", "@" .. (now - 100))
      assert.matches("pushed 0 jobs", ok_cli(env, "schedule", "backfill", "gone",
        "@" .. (now - 50), "@" .. (now - 1)))
      assert.matches("pushed 3 jobs", ok_cli(env, "schedule", "backfill", "gone",
        "@" .. (now - 102), "@" .. (now - 1)))
    end)

    it("a field given null at an add is a field not given (the message said userdata)", function()
      env:config("")
      ok_cli(env, "migrate")
      ok_cli(env, "schedule", "add", "nul", "--every", "1h", "--job", "nj",
        "--payload", "null", "--jitter", "1s")
      local q = jr.client(env)
      assert.is_true(q:schedule_add("nul2", '{"every": null, "cron": "0 * * * *",' ..
        ' "job": "nj", "payload": {"a": null, "b": 1}, "jitter": null}'))
      local h = math.floor(jr.now() / 3600) * 3600 - 3600
      for _, name in ipairs({ "nul", "nul2" }) do
        assert.matches("pushed 1 job", ok_cli(env, "schedule", "backfill", name,
          "@" .. h, "@" .. h))
      end
      local payloads = {}
      for _, j in ipairs(env:jobs("name = 'nj'")) do
        payloads[#payloads + 1] = j.payload:gsub("%s", "")
      end
      table.sort(payloads)
      assert.same({ '{"a":null,"b":1}', "{}" }, payloads)
      local ok, msg = q:schedule_add("nul3", '{"every": "1h", "job": null, "queue": 5}')
      assert.is_nil(ok)
      assert.matches("schedule 'nul3': 'queue'", msg)
      assert.not_matches("userdata", msg)
      ok, msg = q:schedule_add("nul3", '{"cron": null}')
      assert.is_nil(ok)
      assert.matches("schedule 'nul3': 'cron' is missing", msg)
    end)

    it("at most 1000 schedules are managed at run time; adds racing for the last place make one", function()
      env:config("")
      ok_cli(env, "migrate")
      -- 998 rows written as SQL (each runner would read them all at every
      -- change: 20000 took it seconds a change), then two adds
      env:exec(env.backend == "postgres" and
        [[INSERT INTO schedule_defs (name, def) SELECT 'f' || g, '{"every": "1h"}'
          FROM generate_series(1, 998) g]] or
        [[WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 998)
          INSERT INTO schedule_defs (name, def) SELECT 'f' || n, '{"every": "1h"}' FROM g]])
      ok_cli(env, "schedule", "add", "last", "--every", "1h")
      -- four processes race for the thousandth place: one gets it
      local cmd = ("cd %s && %s -c %s schedule add"):format(jr.quote(env.dir),
        jr.quote(jr.bin), jr.quote(env.config_file))
      local go, script = env.dir .. "/go", {}
      for i = 1, 4 do
        script[#script + 1] = ("(while [ ! -e %s ]; do sleep 0.01; done; %s r%d --every 1h" ..
          " > %s/out%d 2>&1; echo $? >> %s/out%d) &"):format(jr.quote(go), cmd, i,
          jr.quote(env.dir), i, jr.quote(env.dir), i)
      end
      script[#script + 1] = "sleep 0.3; touch " .. jr.quote(go) .. "; wait"
      jr.sh(table.concat(script, "\n"))
      local added = 0
      for i = 1, 4 do
        local out = jr.read_file(("%s/out%d"):format(env.dir, i))
        if out:match("\n0\n$") then
          added = added + 1
        else
          assert.matches(("schedule 'r%d': 1000 schedules are managed at run time " ..
            "already, the most; remove one first\n2\n$"):format(i), out)
        end
      end
      assert.equal(1, added)
      assert.equal(1000, tonumber(env:query("SELECT count(*) AS n FROM schedule_defs")[1].n))
      local q = jr.client(env)
      local ok, msg = q:schedule_add("more", { every = "1h" })
      assert.is_nil(ok)
      assert.matches("1000 schedules are managed at run time already", msg)
      -- a name that exists says so; a set and a remove still work
      local out, err = env:cli("schedule", "add", "last", "--every", "1h")
      assert.matches("schedule 'last' exists", out .. err)
      ok_cli(env, "schedule", "set", "last", "--every", "2h")
      ok_cli(env, "schedule", "remove", "last")
      assert.is_true(q:schedule_add("more", { every = "1h" }))
    end)

    it("the HTTP API's backfill takes no window before the epoch", function()
      local base = H.start(env, "")
      H.json(base .. "/api/schedules/neg", 201, { method = "POST",
        body = '{"every": "1h", "job": "n"}' })
      for _, body in ipairs({ '{"from": -7200, "to": 0}', '{"from": -1e400, "to": 10}',
                              '{"from": -1e300, "to": 10}' }) do
        local code, text = H.req(base .. "/api/schedules/neg/backfill", { method = "POST",
          token = true, body = body })
        assert.equal(400, code, body .. " " .. text)
        assert.matches("schedule 'neg': backfill: FROM and TO must be epoch seconds", text)
      end
      assert.equal(0, #env:jobs("name = 'n'"))
      assert.equal(0, env:stop())
    end)

    it("the Lua module refuses a name or a definition holding a NUL byte (C saw another schedule)", function()
      env:config("")
      ok_cli(env, "migrate")
      local q = jr.client(env)
      assert.is_true(q:schedule_add("zz", { every = "1h", job = "z" }))
      local calls = {
        function() return q:schedule_add("zz\0evil", { every = "2h" }) end,
        function() return q:schedule_set("zz\0x", { every = "2h" }) end,
        function() return q:schedule_pause("zz\0x") end,
        function() return q:schedule_resume("zz\0x") end,
        function() return q:schedule_fire("zz\0x") end,
        function() return q:schedule_backfill("zz\0x", 0, 3600) end,
        function() return q:schedule_remove("zz\0x") end,
      }
      for i, call in ipairs(calls) do
        local ok, msg = call()
        assert.is_nil(ok, "call " .. i)
        -- the name as given, its NUL escaped (the C string stopped there)
        assert.matches("invalid schedule name 'zz\\x00", msg, 1, true)
        assert.matches("character 3 is not one of", msg, 1, true)
      end
      local ok, msg = q:schedule_add("zy", '{"every": "1h"}\0{"every": "1s"}')
      assert.is_nil(ok)
      assert.matches("schedule 'zy': the definition holds a NUL byte %(byte 16%)", msg)
      local t = {}
      t.self = t
      ok, msg = q:schedule_add("cyc", { every = "1h", payload = t })
      assert.is_nil(ok)
      assert.matches("schedule 'cyc': the definition cannot be JSON", msg)
      local rows = env:query("SELECT name, def FROM schedule_defs")
      assert.equal(1, #rows)
      assert.same({ every = "1h", job = "z" }, cjson.decode(rows[1].def))
      assert.equal(0, #env:query("SELECT name FROM schedules"))  -- no pause, no fire asked
      assert.equal(0, #env:jobs("name = 'z'"))
    end)

    it("a runner with no schedule added at run time logs no run-time change", function()
      env:config("")
      local p = env:start()
      jr.wait_for(function() return env:log(p):find("started") end, 20, "started")
      jr.sleep(2.5)             -- the table's count is read each second
      assert.equal(0, env:stop(nil, p))
      assert.not_matches("run%-time change", env:log(p))
    end)
  end)
end

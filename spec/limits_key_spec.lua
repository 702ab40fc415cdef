-- limits_key_spec.lua - limits per key (docs/limits.md): the push option
-- `key` from every producer and the payload path a config declares,
-- per-key and global concurrency caps and rates enforced by the claim on
-- both backends and across runners, a killed runner's capacity coming
-- back with its lease, bad limit settings named with file:line, and
-- `jobrunner limits`. (spec/limits_spec.lua is about resource limits.)
local jr = require "jr"
local cjson = require "cjson"

-- A handler that records "key start end" (epoch seconds) to file after
-- sleeping secs; the key is the payload's k.
local function sleeper(file, secs)
  return jr.RECORD .. ([[
    local jobrunner = require "jobrunner"
    return function(job)
      local t0 = jobrunner.now()
      os.execute("sleep %s")
      record(%q, tostring(job.payload.k) .. " " .. t0 .. " " .. jobrunner.now())
    end
  ]]):format(secs, file)
end

local max_overlap, client, line_of = jr.max_overlap, jr.client, jr.line_of

local function keys_of(env)
  local t = {}
  for _, r in ipairs(env:query("SELECT id, limit_key FROM jobs ORDER BY id")) do
    t[#t + 1] = r.limit_key == nil and "(none)" or
                r.limit_key == cjson.null and "(none)" or r.limit_key
  end
  return t
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": the limit key of a push", function()
    local env = jr.test_env(backend)

    it("is stored from the CLI, the Lua module, a handler's push and SQL", function()
      env:config([[limits = { ["lk.b"] = { concurrency = 5 } }]])
      env:script("lk.a", [[
        local jobrunner = require "jobrunner"
        return function(job)
          jobrunner.push("lk.b", {}, { key = "from-handler" })
        end
      ]])
      env:script("lk.b", "return function() end")
      env:push("lk.b", "{}", "--key", "from-cli")
      local q = client(env)
      assert(q:push("lk.b", {}, { key = "from-lua" }))
      q:close()
      if backend == "postgres" then
        env:exec("SELECT push('lk.b', '{}', key => 'from-sql')")
      else
        env:exec("INSERT INTO jobs (name, limit_key) VALUES ('lk.b', 'from-sql')")
      end
      assert.same({ "from-cli", "from-lua", "from-sql" }, keys_of(env))
      env:push("lk.a", "{}")
      env:start()
      jr.wait_for(function() return env:count() == 0 end, 20, "drained")
    end)

    it("comes from the payload path the config declares, or the job runs unkeyed", function()
      env:config([[limits = { ["lk.p"] = { key = "payload.account.id",
        per_key = { concurrency = 1 } } }]])
      -- the runner records the path at start; so does migrate
      local _, err, code = env:cli("migrate")
      assert.are.equal(0, code, err)
      env:push("lk.p", '{"account": {"id": 42}}')
      env:push("lk.p", '{"account": {"id": "acme"}}')
      env:push("lk.p", '{"other": 1}')
      env:push("lk.p", '{"account": {"id": 7}}', "--key", "given")
      local q = client(env)
      assert(q:push("lk.p", { account = { id = "lua" } }))
      q:close()
      if backend == "postgres" then
        env:exec([[SELECT push('lk.p', '{"account": {"id": "sql"}}')]])
      end
      local want = { "42", "acme", "(none)", "given", "lua" }
      if backend == "postgres" then want[#want + 1] = "sql" end
      assert.same(want, keys_of(env))
      -- show says which key a job has, and why it has none
      local out = env:cli("show", "3")
      assert.matches("key%s+%- %(unkeyed: no key given, none at its name's payload path%)", out)
      out = env:cli("show", "1", "--json")
      assert.are.equal("42", cjson.decode(out).key)
      local c = client(env)
      assert.are.equal("acme", c:show(2).key)
      assert.is_nil(c:show(3).key)
      c:close()
    end)

    it("refuses an empty key and one over 256 bytes, naming the job", function()
      local _, err, code = env:cli("push", "lk.b", "{}", "--key", ("x"):rep(257))
      assert.are_not.equal(0, code)
      assert.matches("job 'lk.b': limit key of 257 bytes %(key: 1 to 256 bytes%)", err)
      _, err, code = env:cli("push", "lk.b", "{}", "--key", "")
      assert.are_not.equal(0, code)
      assert.matches("limit key of 0 bytes", err)
      local q = client(env)
      local ok, msg = q:push("lk.b", {}, { key = ("y"):rep(300) })
      assert.is_nil(ok)
      assert.matches("key", msg)
      assert.has_error(function() q:push("lk.b", {}, { key = 7 }) end,
        "push: option 'key' must be a string, got number")
      q:close()
    end)
  end)

  describe(backend .. ": concurrency limits", function()
    local env = jr.test_env(backend)

    it("never runs more than 2 jobs of one key at once: 20 jobs over 3 keys", function()
      env:config([[concurrency = 6,
        limits = { ["lc.k"] = { per_key = { concurrency = 2 } } }]])
      env:script("lc.k", sleeper("runs", "0.1"))
      local q = client(env)
      local jobs = {}
      for i = 1, 20 do
        local k = ({ "a", "b", "c" })[i % 3 + 1]
        jobs[i] = { "lc.k", { k = k }, { key = k } }
      end
      assert(q:push_many(jobs))
      q:close()
      env:start()
      jr.wait_for(function() return env:count() == 0 end, 30, "drained")
      local lines = jr.lines(env.dir .. "/runs")
      assert.equal(20, #lines)
      for _, k in ipairs({ "a", "b", "c" }) do
        assert.is_true(max_overlap(lines, k) <= 2, "key " .. k .. " ran more than 2 at once")
      end
      -- the cap is per key: the keys ran side by side
      assert.is_true(max_overlap(lines) > 2, "keys did not run side by side")
    end)

    it("caps a name and a queue across keys; other names run on", function()
      env:config([[concurrency = 6,
        limits = { ["lc.n"] = { concurrency = 2 }, ["queue:media"] = { concurrency = 1 } }]])
      env:script("lc.n", sleeper("n", "0.1"))
      env:script("lc.m", sleeper("m", "0.1"))
      local q = client(env)
      local jobs = {}
      for i = 1, 8 do jobs[#jobs + 1] = { "lc.n", { k = "n" }, { key = "k" .. i } } end
      for i = 1, 4 do jobs[#jobs + 1] = { "lc.m", { k = "m" }, { queue = "media" } } end
      assert(q:push_many(jobs))
      q:close()
      env:start()
      jr.wait_for(function() return env:count() == 0 end, 30, "drained")
      assert.equal(8, #jr.lines(env.dir .. "/n"))
      assert.equal(4, #jr.lines(env.dir .. "/m"))
      assert.is_true(max_overlap(jr.lines(env.dir .. "/n")) <= 2)
      assert.equal(1, max_overlap(jr.lines(env.dir .. "/m")))
      -- held back is not failed: no attempt counted beyond the one run
      assert.equal(0, env:count("dead"))
    end)

    it("gives a killed runner's capacity back when its lease expires", function()
      env:config([[concurrency = 2, lease = 1,
        limits = { ["lc.crash"] = { per_key = { concurrency = 1 } } }]])
      env:script("lc.crash", jr.RECORD .. [[
        return function(job)
          record("started", job.id .. " " .. job.attempt)
          if job.attempt == 1 and job.payload.first then
            os.execute("echo $$ > sleeper.pid; exec sleep 30")
          end
        end
      ]])
      local first = env:push("lc.crash", '{"first": true}', "--key", "acct")
      local p = env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/started") == 1 end, 10, "first job")
      -- the first job is in its sleep (not only started) when the runner dies
      local pid = jr.wait_for(function()
        return tonumber(jr.read_file(env.dir .. "/sleeper.pid") or "")
      end, 10, "sleeper pid")
      env:signal("KILL", p)
      jr.wait_for(function() return not env:alive(p) end, 10, "runner dead")
      -- the dead runner's sleep goes on: stop it
      os.execute("kill -KILL " .. math.tointeger(pid) .. " 2>/dev/null")
      local second = env:push("lc.crash", "{}", "--key", "acct")
      env:start()
      jr.wait_for(function() return env:count() == 0 end, 20, "both ran")
      local started = jr.lines(env.dir .. "/started")
      assert.equal(3, #started)
      assert.matches("^" .. first .. " 2$", started[2] .. "") -- rescued
      assert.is_truthy(second)
    end)
  end)

  describe(backend .. ": rate limits", function()
    local env = jr.test_env(backend)

    it("runs 50 jobs at 20/1s in the time the rate implies (burst 20, then 20 a second)", function()
      env:config([[concurrency = 4,
        limits = { ["lr.r"] = { rate = "20/1s" } }]])
      env:script("lr.r", jr.RECORD .. [[
        local jobrunner = require "jobrunner"
        return function(job) record("ran", tostring(jobrunner.now())) end
      ]])
      local q = client(env)
      local jobs = {}
      for i = 1, 50 do jobs[i] = { "lr.r", {} } end
      assert(q:push_many(jobs))
      q:close()
      local t0 = jr.now()
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/ran") == 50 end, 20, "50 ran")
      local ts = {}
      for _, l in ipairs(jr.lines(env.dir .. "/ran")) do ts[#ts + 1] = tonumber(l) end
      table.sort(ts)
      local span = ts[50] - ts[1]
      -- 20 at once, then 30 more at 20 a second: 1.5 s
      assert.is_true(span >= 1.3, ("50 jobs took %.2fs, under the rate"):format(span))
      assert.is_true(span < 5, ("50 jobs took %.2fs, far over 1.5s"):format(span))
      -- in any half second, at most burst + rate / 2 jobs ran
      for i = 1, 50 do
        local n = 0
        for k = i, 50 do if ts[k] < ts[i] + 0.5 then n = n + 1 end end
        assert.is_true(n <= 31, "more than 30 jobs in half a second")
      end
      assert.is_true(jr.now() - t0 < 20)
    end)

    it("runs jobs under a rate below one per period: 1/2s has a burst of 1, one job every 2 s", function()
      env:config([[limits = { ["lr.s"] = { rate = "1/2s", per_key = { rate = "0.5/1s" } } }]])
      env:script("lr.s", jr.RECORD .. [[
        local jobrunner = require "jobrunner"
        return function(job) record("slow", tostring(jobrunner.now())) end
      ]])
      assert.are.equal(0, select(3, env:cli("migrate")))
      local out, err, code = env:cli("limits", "--json")
      assert.are.equal(0, code, err)
      local got = cjson.decode(out)
      assert.are.equal(1, got[1].limit.burst)
      assert.are.equal(1, got[1].per_key.burst)
      local q = client(env)
      assert(q:push_many({ { "lr.s", {}, { key = "k" } }, { "lr.s", {}, { key = "k" } } }))
      q:close()
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/slow") == 2 end, 30, "2 ran")
      local ts = {}
      for _, l in ipairs(jr.lines(env.dir .. "/slow")) do ts[#ts + 1] = tonumber(l) end
      table.sort(ts)
      assert.is_true(ts[2] - ts[1] >= 1.5, ("2 jobs %.2fs apart, under 1/2s"):format(ts[2] - ts[1]))
    end)
  end)

  -- settings are read before any database is opened: one backend will do
  if backend == "sqlite" then describe(backend .. ": bad limit settings", function()
    local env = jr.test_env(backend)

    local cases = {
      { [[limits = { ["a.b"] = { rate = "100/xyz" } }]],
        [['limits.a.b.rate' has an invalid period after the '/' in "100/xyz"]] },
      { [[limits = { ["a.b"] = { rate = "0/1m" } }]],
        [['limits.a.b.rate' must have a count above 0]] },
      { [[limits = { ["a.b"] = { per_key = { rate = "-1/1s" } } }]],
        [['limits.a.b.per_key.rate' must have a count above 0]] },
      { [[limits = { ["a.b"] = { concurrency = -2 } }]],
        [['limits.a.b.concurrency' must be a whole number from 0 to 100000]] },
      { [[limits = { ["a.b"] = { key = "account_id" } }]],
        [['limits.a.b.key' must be a payload path such as "payload.account_id"]] },
      { [[limits = { ["a.b"] = { most = 1 } }]],
        [['limits.a.b.most' is not a limit setting]] },
      { [[limits = { ["bad/name"] = { concurrency = 1 } }]],
        [['limits' has a key that names no job or queue: invalid job name 'bad/name']] },
    }
    for _, c in ipairs(cases) do
      it("says where: " .. c[1], function()
        env:config(c[1])
        local _, err, code = env:cli("check")
        assert.are.equal(3, code)
        local line = line_of(env, c[1])
        assert.matches("jobrunner.lua:" .. line .. ": ", err, 1, true)
        assert.matches(c[2], err, 1, true)
      end)
    end

    it("warns at start of a limit for a name no handler has", function()
      env:config([[limits = { ["nobody.here"] = { concurrency = 1 } }]])
      env:script("lb.ok", "return function() end")
      local p = env:start()
      jr.wait_for(function()
        return (jr.read_file(p.err) or ""):find("limit 'nobody.here': no handler of that name", 1, true)
      end, 10, "warning")
      assert.is_true(env:alive(p))
    end)
  end) end
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": jobrunner limits", function()
    local env = jr.test_env(backend)

    it("shows each limit with its use: running, waiting, tokens, top keys", function()
      env:config([[limits = { ["li.a"] = { concurrency = 4, rate = "100/1m",
        per_key = { concurrency = 2 } }, ["queue:media"] = { concurrency = 3 } }]])
      local q = client(env)
      local jobs = {}
      for _, k in ipairs({ "x", "x", "x", "y", "y", "z" }) do
        jobs[#jobs + 1] = { "li.a", {}, { key = k } }
      end
      jobs[#jobs + 1] = { "li.b", {}, { queue = "media" } }
      assert(q:push_many(jobs))
      q:close()
      env:exec("UPDATE jobs SET state = 'running' WHERE id = 6")
      local out, err, code = env:cli("limits", "--json")
      assert.are.equal(0, code, err)
      local got = cjson.decode(out)
      assert.are.equal(2, #got)
      local a, m = got[1], got[2]
      assert.are.equal("li.a", a.name)
      assert.are.equal(4, a.limit.concurrency)
      assert.are.equal("100/1m", a.limit.rate)
      assert.are.equal(100, a.limit.burst)
      assert.are.equal(2, a.per_key.concurrency)
      assert.are.equal(1, a.running)
      assert.are.equal(5, a.waiting)
      assert.are.equal(100, a.tokens)
      assert.are.same({ key = "x", waiting = 3, running = 0, tokens = cjson.null }, a.top_keys[1])
      assert.are.same({ key = "y", waiting = 2, running = 0, tokens = cjson.null }, a.top_keys[2])
      assert.are.same({ key = "z", waiting = 0, running = 1, tokens = cjson.null }, a.top_keys[3])
      assert.are.equal("queue:media", m.name)
      assert.are.equal(1, m.waiting)
      assert.are.equal(cjson.null, m.tokens)
      out, err, code = env:cli("limits")
      assert.are.equal(0, code, err)
      assert.matches("li.a%s+4, 100/1m%s+2%s+1%s+5%s+100.0", out)
      assert.matches("key x%s+0 running%s+3 waiting", out)
    end)
  end)
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": limits from Lua", function()
    local env = jr.test_env(backend)

    it("the AIMD example halves a failing name's rate and adds it back once it recovers", function()
      env:config(([[concurrency = 4, tick_interval = 0.1,
        defaults = { max_retries = 0 },
        limits = { ["api.call"] = { rate = "20/1s" } },
        hooks = { on_tick = dofile(%q) { name = "api.call", max = 20, min = 1,
          step = 4, on_change = function(r)
            local f = io.open(%q, "a"); f:write(r, "\n"); f:close()
          end } }]]):format(jr.root .. "/examples/aimd/aimd.lua", env.dir .. "/rates"))
      env:script("api.call", jr.read_file(jr.root .. "/examples/aimd/scripts/api/call.lua"))
      jr.write_file(env.dir .. "/service.down", "")
      local q = client(env)
      local jobs = {}
      for i = 1, 300 do jobs[i] = { "api.call", {} } end
      assert(q:push_many(jobs))
      q:close()
      local function rates()
        local t = {}
        for _, l in ipairs(jr.lines(env.dir .. "/rates")) do t[#t + 1] = tonumber(l) end
        return t
      end
      env:start()
      jr.wait_for(function() local r = rates(); return r[#r] and r[#r] <= 5 end, 10, "rate halved twice")
      os.remove(env.dir .. "/service.down")
      jr.wait_for(function() local r = rates(); return r[#r] >= 17 end, 10, "rate back")
      local r = rates()
      assert.are.same({ 10, 5 }, { r[1], r[2] })
      local low = math.huge
      for _, v in ipairs(r) do low = math.min(low, v) end
      assert.is_true(low <= 5)
      assert.is_true(env:count("dead") > 0)
      assert.is_true(env:alive())
    end)

    it("the AIMD example with min below 1 gets its rate back from the bottom", function()
      env:config(([[concurrency = 2, tick_interval = 0.1,
        defaults = { max_retries = 0 },
        limits = { ["api.call"] = { rate = "2/1s" } },
        hooks = { on_tick = dofile(%q) { name = "api.call", max = 2, min = 0.25,
          step = 1, on_change = function(r)
            local f = io.open(%q, "a"); f:write(r, "\n"); f:close()
          end } }]]):format(jr.root .. "/examples/aimd/aimd.lua", env.dir .. "/rates"))
      env:script("api.call", jr.read_file(jr.root .. "/examples/aimd/scripts/api/call.lua"))
      jr.write_file(env.dir .. "/service.down", "")
      local q = client(env)
      local jobs = {}
      for i = 1, 100 do jobs[i] = { "api.call", {} } end
      assert(q:push_many(jobs))
      q:close()
      local function rates()
        local t = {}
        for _, l in ipairs(jr.lines(env.dir .. "/rates")) do t[#t + 1] = tonumber(l) end
        return t
      end
      env:start()
      jr.wait_for(function() local r = rates(); return r[#r] == 0.25 end, 30, "rate at its min")
      os.remove(env.dir .. "/service.down")
      -- at 0.25/1s a job starts within 4 s; its success adds the step back
      jr.wait_for(function() local r = rates(); return r[#r] >= 2 end, 30, "rate back")
      assert.is_true(env:alive())
    end)

    -- the hooks' Lua does not depend on the backend: one will do
    if backend == "sqlite" then it("jobrunner.limits get and set from a hook; a bad setting is an error naming the key", function()
      env:config(([[tick_interval = 0.1,
        limits = { ["lu.a"] = { concurrency = 3, rate = "10/1s" },
                   ["lu.w"] = { concurrency = 1 } },
        hooks = { on_tick = function(ev)
          local limits = require "jobrunner.limits"
          local f = io.open(%q, "a")
          local a = limits.get("lu.a")
          f:write(a.concurrency, " ", a.rate, " ", a.burst, "\n")
          local ok, err = limits.set("lu.a", { rate = "0/1m" })
          f:write(tostring(ok), " ", tostring(err), "\n")
          assert(limits.set("lu.a", { concurrency = 1, rate = false }))
          assert(limits.set("lu.new", { per_key = { concurrency = 2 } }))
          a = limits.get("lu.a")
          f:write(a.concurrency, " ", tostring(a.rate), " ", limits.get()["lu.new"].per_key.concurrency, "\n")
          local w = ev.limits["lu.w"]
          f:write("lu.w waiting ", tostring(w.waiting), " running_all ", tostring(w.running_all), "\n")
          f:close()
          return nil
        end }]]):format(env.dir .. "/seen"))
      env:script("lu.a", "return function() end")
      env:push("lu.w", "{}")
      env:push("lu.w", "{}")
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/seen") >= 4 end, 10, "hook ran")
      local seen = jr.lines(env.dir .. "/seen")
      assert.are.equal("3 10/1s 10", seen[1])
      assert.are.equal("nil jobrunner.limits.set: 'limits.lu.a.rate' must have a count above 0 " ..
        "(at most 1e9) before the '/', got \"0/1m\"", seen[2])
      assert.are.equal("1 nil 2", seen[3])
      -- on_tick's figures of a limit from the database: ready, running anywhere
      assert.are.equal("lu.w waiting 2 running_all 0", seen[4])
    end) end
  end)
end

if jr.backends()[2] == "postgres" or jr.backends()[1] == "postgres" then
  describe("postgres: two runners", function()
    local env = jr.test_env("postgres")

    it("share one cap: never more than 2 jobs of the name at once across both", function()
      env:config([[concurrency = 3, poll_interval = 0.2,
        limits = { ["l2.n"] = { concurrency = 2 } }]])
      env:script("l2.n", sleeper("runs", "0.2"))
      local q = client(env)
      local jobs = {}
      for i = 1, 12 do jobs[i] = { "l2.n", { k = "x" } } end
      assert(q:push_many(jobs))
      q:close()
      env:start()
      env:start()
      jr.wait_for(function() return env:count() == 0 end, 30, "drained")
      local lines = jr.lines(env.dir .. "/runs")
      assert.equal(12, #lines)
      assert.is_true(max_overlap(lines) <= 2, "more than 2 at once across runners")
    end)
  end)
end

-- A claim under a per-key rate reads the buckets of the keys it meets,
-- not every bucket: with 100,000 buckets of keys long drained, claims of a
-- few jobs each (the jobs are not short enough to be claimed ahead) held
-- SQLite's write lock for most of the time, and producers and stats waited
-- out their busy timeout ("database is locked").
describe("sqlite: a drain under a per-key rate", function()
  local env = jr.test_env("sqlite")

  it("leaves producers and stats the lock, with 100,000 buckets of old keys", function()
    env:config([[concurrency = 8, busy_timeout = 2,
      limits = { ["ld.k"] = { per_key = { rate = "1/1h" } } }]])
    env:script("ld.k", [[return function() os.execute("sleep 0.01") end]])
    env:script("ld.other", "return function() end")
    assert.are.equal(0, select(3, env:cli("migrate")))
    env:exec([[WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n
      WHERE i < 100000) INSERT INTO limit_buckets (scope, key, tokens, updated_at)
      SELECT 'ld.k', 'old' || i, 0, (julianday('now') - 2440587.5) * 86400.0 FROM n]])
    local q = client(env)
    local jobs = {}
    for i = 1, 1500 do jobs[i] = { "ld.k", {}, { key = "new" .. i } } end
    assert(q:push_many(jobs))
    q:close()
    env:start()
    local failed, calls = {}, 0
    jr.wait_for(function()
      for _, args in ipairs({ { "push", "ld.other", "{}" }, { "stats" } }) do
        local _, err, code = env:cli(table.unpack(args))
        calls = calls + 1
        if code ~= 0 then failed[#failed + 1] = args[1] .. ": " .. err end
      end
      return #failed > 0 or env:count() == 0
    end, 90, "drained, or a call failed")
    assert.are.same({}, failed)
    assert.is_true(calls >= 2)
  end)
end)

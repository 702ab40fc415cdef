-- expiry_spec.lua - push options expires_in / expires_at and deadline
-- (docs/queues.md, "Expiry and deadlines"), on each backend: a job not
-- started by its expiry never starts (the claim's own test, whichever
-- runner claims) and ends in the final state expired, counted and shown
-- where states are; a job started before it runs as any; a failing job
-- with a deadline is retried until a retry would start past it, then
-- ends dead with "deadline passed". Every producer's option reaches the
-- row; bad values are refused naming the option.
local jr = require "jr"
local H = require "jrhttp"
local cjson = require "cjson"

-- records each start of a job, then succeeds
local REC = [[
return { handle = function(job)
  local f = assert(io.open(%q, "a"))
  f:write(job.id, "\n")
  f:close()
end }
]]

local FAIL = [[
return { max_retries = 1000, backoff = 0.2, handle = function(job)
  local f = assert(io.open(%q, "a"))
  f:write(job.id, "\n")
  f:close()
  error("boom")
end }
]]

-- the ids in file path, as a set
local function starts(path)
  local t = {}
  for _, l in ipairs(jr.lines(path)) do t[tonumber(l)] = (t[tonumber(l)] or 0) + 1 end
  return t
end

local function null(v) return v == nil or v == cjson.null end

-- expires_at (epoch seconds), deadline and deadline_at of job id
local function expiry(env, id)
  local sql = env.backend == "postgres"
    and "SELECT extract(epoch FROM expires_at)::float8 AS expires_at, deadline," ..
        " extract(epoch FROM deadline_at)::float8 AS deadline_at FROM jobs WHERE id = "
    or "SELECT expires_at, deadline, deadline_at FROM jobs WHERE id = "
  return env:query(sql .. math.tointeger(id))[1]
end

for _, backend in ipairs(jr.backends()) do
  local pg = backend == "postgres"
  describe(backend .. " expiry:", function()
    local env = jr.test_env(backend)

    it("never starts a job past its expiry, whichever of two runners claims; it ends expired", function()
      local log = env.dir .. "/starts"
      env:script("rec", REC:format(log))
      local gone, fresh = {}, {}
      for i = 1, 4 do
        gone[i] = env:push("rec", nil, "--expires-at", "@1000")
        fresh[i] = env:push("rec", nil, "--expires-in", "3600")
      end
      -- a unique key held by a job that expires is free after
      local keyed = env:push("rec", nil, "--expires-at", "2000-01-01T00:00:00Z",
                             "--unique-key", "k1")
      -- a child waiting for a job that expires ends as a dead parent's
      -- would (its on_parent_failure); a job of a sequence behind it runs
      local child = env:push("rec", nil, "--after", tostring(math.tointeger(gone[1])),
                             "--on-parent-failure", "run")
      local seq1 = env:push("rec", nil, "--sequence", "s1", "--expires-at", "@1000")
      local seq2 = env:push("rec", nil, "--sequence", "s1")
      env:start()
      env:start()
      for _, id in ipairs(gone) do env:wait_state(id, "expired", 20) end
      env:wait_state(keyed, "expired", 20)
      env:wait_state(seq1, "expired", 20)
      jr.wait_for(function()
        local s = starts(log)
        for _, id in ipairs(fresh) do if not s[id] then return false end end
        return s[child] and s[seq2]
      end, 20, "the jobs not expired ran")
      -- a job pushed after one that expired already does not wait for it
      local late = env:push("rec", nil, "--after", tostring(math.tointeger(gone[2])),
                            "--on-parent-failure", "run")
      jr.wait_for(function() return starts(log)[late] end, 20, "the late child ran")
      local s = starts(log)
      for _, id in ipairs(gone) do assert.is_nil(s[id], "expired job " .. id .. " started") end
      assert.is_nil(s[keyed])
      assert.is_nil(s[seq1])
      for _, id in ipairs(fresh) do assert.equal(1, s[id]) end
      local row = env:job(gone[1])
      assert.equal(0, row.attempts)
      assert.matches("expired", row.last_error)
      -- the key is free: a new job takes it
      local out, err, code = env:cli("push", "rec", "--unique-key", "k1")
      assert.equal(0, code, err)
      assert.matches("new", out)
      env:stop(nil, env.procs[1])
      env:stop(nil, env.procs[2])
    end)

    it("runs a job started before its expiry as any other", function()
      local log = env.dir .. "/starts"
      env:script("rec", REC:format(log))
      env:start()
      local id = env:push("rec", nil, "--expires-in", "0.5s")
      jr.wait_for(function() return starts(log)[id] end, 20, "the job ran")
      jr.wait_for(function() return env:job(id) == nil end, 20, "the job's success")
      env:stop()
    end)

    it("ends a failing job dead with 'deadline passed' once a retry would start past its deadline", function()
      local log = env.dir .. "/fails"
      env:script("fail", FAIL:format(log))
      local id = env:push("fail", nil, "--deadline", "1")
      local plain = env:push("fail", nil, "--max-retries", "1")
      env:start()
      local row = env:wait_state(id, "dead", 30)
      assert.equal("deadline passed", row.last_error)
      local n = starts(log)[id]
      -- backoff 0.2 s doubling: retries at 0.2, 0.6, then one due past 1 s
      assert.is_true(n >= 2 and n <= 4, "attempts: " .. tostring(n))
      assert.equal(n, row.attempts)
      local e = expiry(env, id)
      assert.equal(1, e.deadline)
      assert.is_number(e.deadline_at)
      -- its attempts keep their own errors
      local out, err, code = env:cli("show", tostring(id), "--json")
      assert.equal(0, code, err)
      local j = cjson.decode(out)
      assert.equal("dead", j.state)
      assert.matches("boom", cjson.encode(j.attempts))
      -- a job without a deadline is not touched by it
      row = env:wait_state(plain, "dead", 30)
      assert.matches("boom", row.last_error)
      assert.is_true(null(expiry(env, plain).deadline_at))
      env:stop()
    end)

    it("takes the options from every producer and shows expired everywhere states are", function()
      local log = env.dir .. "/starts"
      env:script("rec", REC:format(log))
      env:script("maker", [[
local jobrunner = require "jobrunner"
return { handle = function(job)
  jobrunner.push("rec", {}, { expires_in = 600, deadline = 40, run_in = 3600 })
end }
]])
      local base = H.start(env)
      local now = jr.now()
      -- CLI
      local c1 = env:push("rec", nil, "--expires-in", "10m", "--deadline", "30",
                          "--in", "1h")
      -- the Lua producer module (the C library's jr_client_opts)
      local q = jr.client(env)
      local c2 = assert(q:push("rec", {}, { expires_at = now + 700, deadline = 0.5,
                                            run_in = 3600 }))
      local shown = assert(q:show(c2))
      assert.equal(0.5, shown.deadline)
      assert.is_true(math.abs(now + 700 - shown.expires_at) < 60)
      q:close()
      -- HTTP
      local c3 = H.json(base .. "/api/jobs", 201, { body = cjson.encode({
        name = "rec", expires_in = "15m", deadline = 20, delay = 3600 }) }).id
      local c4 = H.json(base .. "/api/jobs", 201, { body = cjson.encode({
        name = "rec", expires_at = "2000-01-01T00:00:00Z" }) }).id
      local code, body = H.req(base .. "/api/jobs", { token = true,
        body = cjson.encode({ name = "rec", expires_in = -5 }) })
      assert.equal(400, code, body)
      assert.matches("expires_in -5 is not a delay", body, 1, true)
      -- a handler's push
      local m = env:push("maker")
      jr.wait_for(function() return env:job(m) == nil end, 20, "maker ran")
      local c5 = env:query("SELECT max(id) AS id FROM jobs WHERE name = 'rec'")[1].id
      local function near(want, got) return math.abs(want - got) < 60 end
      local e = expiry(env, c1)
      assert.is_true(near(now + 600, e.expires_at), cjson.encode(e))
      assert.equal(30, e.deadline)
      e = expiry(env, c2)
      assert.is_true(near(now + 700, e.expires_at), cjson.encode(e))
      assert.equal(0.5, e.deadline)
      e = expiry(env, c3)
      assert.is_true(near(now + 900, e.expires_at), cjson.encode(e))
      assert.equal(20, e.deadline)
      assert.equal(946684800, expiry(env, c4).expires_at)
      e = expiry(env, c5)
      assert.is_true(near(now + 600, e.expires_at), cjson.encode(e))
      assert.equal(40, e.deadline)
      if pg then
        local id = tonumber(jr.psql(("SET search_path TO %s; SELECT push('rec'," ..
          " run_at => now() + interval '1 hour', expires_at => now() + interval '5 minutes'," ..
          " deadline => interval '90 seconds')"):format(env.schema)):match("%d+"))
        e = expiry(env, id)
        assert.is_true(near(now + 300, e.expires_at), cjson.encode(e))
        assert.equal(90, e.deadline)
        -- a plain SQL push without them has none
        id = tonumber(jr.psql(("SET search_path TO %s; SELECT push('rec'," ..
          " run_at => now() + interval '1 hour')"):format(env.schema)):match("%d+"))
        e = expiry(env, id)
        assert.is_true(null(e.expires_at))
        assert.is_true(null(e.deadline))
      end
      -- c4 expired: shown and counted everywhere
      env:wait_state(c4, "expired", 20)
      assert.equal(1, env:stats().expired)
      assert.equal(1, env:stats().names.rec.expired)
      local out, err, code = env:cli("stats")
      assert.equal(0, code, err)
      assert.matches("expired 1", out)
      out, err, code = env:cli("show", tostring(math.tointeger(c4)))
      assert.equal(0, code, err)
      assert.matches("expired", out)
      assert.matches("expires_at%s+2000%-01%-01", out)
      out, err, code = env:cli("show", tostring(math.tointeger(c1)), "--json")
      assert.equal(0, code, err)
      shown = cjson.decode(out)
      assert.equal(30, shown.deadline)
      assert.is_string(shown.expires_at)
      assert.equal(cjson.null, shown.deadline_at)
      shown = H.json(base .. "/api/jobs/" .. math.tointeger(c3))
      assert.equal(20, shown.deadline)
      assert.is_true(near(now + 900, shown.expires_at), cjson.encode(shown))
      out, err, code = env:cli("list", "--state", "expired", "--json")
      assert.equal(0, code, err)
      local listed = cjson.decode(out)
      assert.equal(1, #listed)
      assert.equal(c4, listed[1].id)
      local api = H.json(base .. "/api/jobs?state=expired")
      assert.equal(1, #api)
      assert.equal("expired", api[1].state)
      assert.equal(1, H.json(base .. "/api/stats").expired)
      local _, metrics = H.req(base .. "/metrics", { token = true })
      assert.matches('jobrunner_jobs{name="rec",state="expired"} 1', metrics, 1, true)
      assert.matches('jobrunner_queue_jobs{queue="default",state="expired"} 1', metrics, 1, true)
      -- dead retry takes an expired job back, its expiry gone: it runs
      out, err, code = env:cli("dead", "retry", tostring(math.tointeger(c4)))
      assert.equal(0, code, out .. err)
      jr.wait_for(function() return starts(log)[c4] end, 20, "the retried job ran")
      env:stop()
    end)

    it("counts an expired member of a batch as dead: no on_success", function()
      local log = env.dir .. "/starts"
      env:script("rec", REC:format(log))
      local f = env.dir .. "/flow.json"
      jr.write_file(f, cjson.encode({ jobs = {
        { ref = "a", name = "rec", expires_at = 1000 },
        { ref = "b", name = "rec", expires_in = 3600, deadline = 60 } },
        batch = { on_complete = "done", on_success = "ok" } }))
      local out, err, code = env:cli("push-flow", f, "--json")
      assert.equal(0, code, out .. err)
      local ids = cjson.decode(out)
      env:start()
      local done = jr.wait_for(function()
        return env:jobs("name = 'done'")[1]
      end, 20, "the batch's on_complete")
      assert.equal(1, cjson.decode(done.payload).counts.dead)
      assert.equal(1, cjson.decode(done.payload).counts.completed)
      assert.equal(0, #env:jobs("name = 'ok'"))
      assert.is_nil(starts(log)[ids.jobs and ids.jobs.a or ids.a])
      env:stop()
    end)

    it("keeps an expired job as long as dead ones; rerun runs it", function()
      local log = env.dir .. "/starts"
      env:config('retention = { dead = "1h" }')
      env:script("rec", REC:format(log))
      local a = env:push("rec", nil, "--expires-at", "@1000")
      local b = env:push("rec", nil, "--expires-at", "@1000")
      env:start()
      env:wait_state(a, "expired", 20)
      env:wait_state(b, "expired", 20)
      local out, err, code = env:cli("rerun", tostring(math.tointeger(a)))
      assert.equal(0, code, out .. err)
      jr.wait_for(function() return starts(log)[a] end, 20, "the rerun job ran")
      env:exec(pg and ("UPDATE jobs SET finished_at = now() - interval '2 hours' WHERE id = %d")
                       :format(b)
               or ("UPDATE jobs SET finished_at = finished_at - 7200 WHERE id = %d"):format(b))
      jr.wait_for(function() return env:job(b) == nil end, 30, "the old expired job pruned")
      assert.is_nil(starts(log)[b])
      env:stop()
    end)

    it("refuses bad values, naming the option", function()
      local cases = {
        { { "--expires-in", "-1" }, "invalid --expires-in '-1'" },
        { { "--expires-in", "nan" }, "invalid --expires-in 'nan'" },
        { { "--expires-in", "0" }, "--expires-in '0': expected a duration above 0" },
        { { "--expires-in", "1e12" }, "expires_in 1e+12 is not a delay" },
        { { "--expires-at", "tomorrow" }, "--expires-at" },
        { { "--deadline", "-5" }, "invalid --deadline '-5'" },
        { { "--deadline", "1e12" }, "deadline 1e+12 is not a duration" },
        { { "--expires-in", "5", "--expires-at", "@2000000000" }, "not both" },
      }
      for _, c in ipairs(cases) do
        local out, err, code = env:cli("push", "rec", table.unpack(c[1]))
        assert.are_not.equal(0, code, out)
        assert.matches(c[2], err, 1, true)
      end
      local q = jr.client(env)
      for _, o in ipairs({ { expires_in = -1 }, { expires_in = 0 / 0 },
                           { expires_at = math.huge }, { deadline = -1 },
                           { expires_in = 1, expires_at = 2e9 } }) do
        local ok, r, e = pcall(q.push, q, "rec", {}, o)
        assert.is_falsy(ok and r)
        e = ok and e or r
        local k = next(o)
        assert.truthy(tostring(e):find("expires") or tostring(e):find("deadline"),
                      next(o) .. ": " .. tostring(e))
        assert.truthy(tostring(e):find(k, 1, true) or tostring(e):find("not both"), tostring(e))
      end
      q:close()
      if pg then
        local _, err = jr.sh(("psql -X -q -v ON_ERROR_STOP=1 %s -c %s"):format(
          jr.quote(jr.pg_url), jr.quote(("SET search_path TO %s; SELECT push('rec'," ..
          " deadline => interval '-1 second')"):format(env.schema))))
        assert.matches("deadline", err)
        _, err = jr.sh(("psql -X -q -v ON_ERROR_STOP=1 %s -c %s"):format(
          jr.quote(jr.pg_url), jr.quote(("SET search_path TO %s; SELECT push('rec'," ..
          " expires_at => 'infinity')"):format(env.schema))))
        assert.matches("expires_at", err)
      else
        local _, err, code = jr.sh(("sqlite3 -cmd '.timeout 10000' %s %s"):format(jr.quote(env:sqlite_path()),
          jr.quote("INSERT INTO jobs (name, expires_at) VALUES ('rec', -5)")))
        assert.are_not.equal(0, code)
        assert.matches("expires_at", err)
      end
      assert.equal(0, env:count())
    end)
  end)
end

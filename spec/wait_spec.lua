-- wait_spec.lua - `jobrunner wait` beyond the plain cases of
-- results_spec: a job whose row is gone (a plain success, a dead job
-- purged, a cancelled one pruned, a push rolled back) is "gone", exit 6,
-- never completed; an error is printed only for a job that ended failed,
-- and stays on its one line (plain: escaped; --json: valid JSON); a gone
-- job whose success a child or its batch recorded is completed; on
-- PostgreSQL a wait whose connections are terminated (or closed by its
-- role's idle_session_timeout) opens them again and sees the end, even
-- one it missed meanwhile, and one that cannot gives up with exit 7.
local jr = require "jr"
local cjson = require "cjson"

local q = jr.quote

local function lines(out)
  local t = {}
  for l in out:gmatch("([^\n]*)\n") do t[#t + 1] = l end
  return t
end

local wait_bg = jr.wait_bg

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " wait:", function()
    local env = jr.test_env(backend)

    it("says gone, exit 6, for a job whose row was deleted: never completed", function()
      env:script("ok", "return function() end")
      env:script("boom", "return { max_retries = 0, handle = function() error('boom') end }")
      env:config('retention = { cancelled = "0s" }')
      local plain = env:push("ok", "{}")
      local dead = env:push("boom", "{}")
      local cancelled = env:push("ok", "{}", "--in", "1h")
      local kept = env:push("ok", "{}", "--result-ttl", "1h")
      env:start()
      assert.equal(0, select(3, env:cli("cancel", tostring(cancelled))))
      env:wait_state(dead, "dead", 30)
      jr.wait_for(function() return env:job(plain) == nil end, 30, "plain success deleted")
      jr.wait_for(function() return env:job(cancelled) == nil end, 30, "cancelled pruned")
      env:wait_state(kept, "completed", 30)
      assert.equal(0, env:stop())
      -- the dead job as it stands, then purged
      local out, err, code = env:cli("wait", tostring(dead))
      assert.equal(1, code, err)
      assert.matches("^" .. dead .. " dead %- %(.*boom.*%)\n$", out)
      assert.equal(0, select(3, env:cli("dead", "purge")))
      assert.is_nil(env:job(dead))
      out, err, code = env:cli("wait", tostring(plain), tostring(dead), tostring(cancelled),
        tostring(kept))
      assert.equal(6, code, err)
      assert.equal(("%d gone -\n%d gone -\n%d gone -\n%d completed -\n"):format(
        plain, dead, cancelled, kept), out)
      out, err, code = env:cli("wait", "--json", tostring(dead))
      assert.equal(6, code, err)
      assert.same({ id = dead, state = "gone", result = cjson.null, error = cjson.null },
        cjson.decode(out))
      if backend == "postgres" then
        -- a push rolled back: its id was given out, no row was ever there
        local o = jr.sh(("psql -X -q -A -t -v ON_ERROR_STOP=1 %s -c %s -c BEGIN -c %s -c ROLLBACK")
          :format(q(jr.pg_url), q("SET search_path TO " .. env.schema),
            q("INSERT INTO jobs (name) VALUES ('ok') RETURNING id")))
        local rolled = assert(tonumber(o:match("%d+")), o)
        out, err, code = env:cli("wait", tostring(rolled))
        assert.equal(6, code, out .. err)
        assert.equal(rolled .. " gone -\n", out)
      end
      -- the Lua client says the same
      local c = jr.client(env)
      local got = assert(c:wait({ plain, kept }))
      assert.equal("gone", got[1].state)
      assert.equal("completed", got[2].state)
      c:close()
      -- an id never given: no such job, 5
      out, err, code = env:cli("wait", tostring(kept + 1000))
      assert.equal(5, code, out .. err)
      assert.matches("job " .. (kept + 1000) .. ": no such job", err, 1, true)
    end)

    it("says completed for a deleted job whose success a child or its batch recorded", function()
      env:script("five", "return function() return 5 end")
      env:config('result_ttl = "1s"')
      local function flow(json)
        local path = env.dir .. "/flow.json"
        local f = assert(io.open(path, "w"))
        f:write(json)
        f:close()
        local out, err, code = env:cli("push-flow", path)
        assert.equal(0, code, err)
        local ids = {}
        for ref, id in out:gmatch("(%w+) (%d+)") do ids[ref] = tonumber(id) end
        return ids
      end
      -- the child and the batch's callback wait in a queue no runner serves
      local a = flow('[{"ref": "a", "name": "five"},' ..
        ' {"ref": "b", "name": "five", "after": ["a"], "queue": "later"}]')
      local m = flow('{"jobs": [{"ref": "m", "name": "five"},' ..
        ' {"ref": "n", "name": "five", "queue": "later"}],' ..
        ' "batch": {"on_complete": "five", "queue": "later", "results": true}}')
      env:start(nil, { args = { "--queues", "default" } })
      -- kept 1 s for their results, then pruned (every 5 s)
      jr.wait_for(function() return env:job(a.a) == nil and env:job(m.m) == nil end, 30,
        "a and m pruned")
      assert.equal(0, env:stop())
      local out, err, code = env:cli("wait", tostring(a.a), tostring(m.m))
      assert.equal(0, code, out .. err)
      assert.equal(("%d completed 5\n%d completed 5\n"):format(a.a, m.m), out)
    end)

    it("prints an error only for a job that ended failed, on its one line", function()
      -- a tab, a newline, an escape and a backslash in the error
      env:script("flaky", [[
        return { max_retries = 1, backoff = 0, handle = function(job)
          if job.attempt == 1 then error("first\ttry\nline two\27[31m\\end", 0) end
          return 7
        end }]])
      env:script("bad", [[
        return { max_retries = 0, handle = function()
          error("line one\nline two\1\127 end", 0)
        end }]])
      local flaky = env:push("flaky", "{}")
      local bad = env:push("bad", "{}")
      env:start()
      local out, err, code = env:cli("wait", tostring(flaky), tostring(bad), "--timeout", "60")
      assert.equal(1, code, err)
      local l = lines(out)
      assert.equal(2, #l, out)
      assert.equal(flaky .. " completed 7", l[1])
      local want = bad .. " dead - (line one\\nline two\\x01\\x7f end"
      assert.equal(want, l[2]:sub(1, #want))
      assert.matches("%)$", l[2])
      assert.is_nil(l[2]:find("[%c]"))
      -- the error was kept on the completed job: show still says it
      local shown = cjson.decode((env:cli("show", tostring(flaky), "--json")))
      assert.matches("first\ttry\nline two", shown.last_error, 1, true)
      out, err, code = env:cli("wait", "--json", tostring(flaky), tostring(bad))
      assert.equal(1, code, err)
      l = lines(out)
      assert.equal(2, #l, out)
      local a, b = cjson.decode(l[1]), cjson.decode(l[2])
      assert.equal("completed", a.state)
      assert.equal(7, a.result)
      assert.equal(cjson.null, a.error)
      assert.equal("dead", b.state)
      want = "line one\nline two\1\127 end"
      assert.equal(want, b.error:sub(1, #want))
      assert.equal(0, env:stop())
    end)

    if backend == "postgres" then
      -- The wait's backends on env's schema: its LISTEN, its reads.
      local function wait_backends(env)
        return ([[SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND
          (query = 'LISTEN "%s_finished"' OR (query LIKE '%%unnest%%' AND
           query LIKE '%%"%s".jobs%%'))]]):format(env.schema, env.schema)
      end

      it("opens its connections again when they are terminated, and sees the end", function()
        env:script("r", "return function() return 9 end")
        local id = env:push("r", "{}")
        local read = wait_bg(env, tostring(id), "--timeout", "120")
        jr.wait_for(function()
          return #env:query(wait_backends(env)) >= 2
        end, 30, "the wait's LISTEN and read")
        local old = env:query(wait_backends(env))
        env:exec(("SELECT pg_terminate_backend(pid) FROM (%s) w"):format(wait_backends(env)))
        -- the LISTEN back on a new backend before the job ends
        jr.wait_for(function()
          for _, r in ipairs(env:query(("SELECT pid FROM pg_stat_activity WHERE" ..
              " query = 'LISTEN \"%s_finished\"'"):format(env.schema))) do
            local new = true
            for _, o in ipairs(old) do new = new and o.pid ~= r.pid end
            if new then return true end
          end
        end, 30, "a new LISTEN")
        env:start()
        local out, err, code = read()
        assert.equal(0, code, out .. err)
        assert.equal(id .. " completed 9\n", out)
        assert.equal(0, env:stop())
      end)

      -- Runs fn(as_role) with a role of its own on env's schema, whose
      -- logins can be refused; as_role(true) makes the config use it,
      -- as_role(false) the cluster's owner again. Drops the role after.
      local function with_role(env, fn)
        local role = ("jrw_%d"):format(math.random(1, 1e9))
        env:exec(("CREATE ROLE %s LOGIN; GRANT USAGE ON SCHEMA %s TO %s;" ..
          " GRANT SELECT, UPDATE ON ALL TABLES IN SCHEMA %s TO %s;" ..
          " GRANT SELECT ON ALL SEQUENCES IN SCHEMA %s TO %s"):format(role, env.schema,
          role, env.schema, role, env.schema, role))
        local ok, e = pcall(fn, role, function(on)
          env.url = on and jr.pg_url:gsub("user=postgres", "user=" .. role) or jr.pg_url
          env:config("")
        end)
        env.url = jr.pg_url
        env:config("")
        env:exec(("DROP OWNED BY %s; DROP ROLE %s"):format(role, role))
        assert(ok, e)
      end

      it("waits on through its role's idle_session_timeout", function()
        env:script("r", "return function() return 3 end")
        local id = env:push("r", "{}")
        with_role(env, function(role, as_role)
          env:exec(("ALTER ROLE %s SET idle_session_timeout = '1s'"):format(role))
          as_role(true)
          local read = wait_bg(env, tostring(id), "--timeout", "120")
          jr.wait_for(function() return #env:query(wait_backends(env)) >= 1 end, 30,
            "the wait's LISTEN or read")
          jr.sleep(3)           -- its idle connections closed, more than once
          as_role(false)
          env:start()
          local out, err, code = read()
          assert.equal(0, code, out .. err)
          assert.equal(id .. " completed 3\n", out)
          assert.equal(0, env:stop())
        end)
      end)

      it("sees an end it missed while its connections were down", function()
        env:script("r", "return function() return 5 end")
        local id = env:push("r", "{}")
        with_role(env, function(role, as_role)
          as_role(true)
          local read = wait_bg(env, tostring(id), "--timeout", "120")
          jr.wait_for(function() return #env:query(wait_backends(env)) >= 2 end, 30,
            "the wait's LISTEN and read")
          env:exec(("ALTER ROLE %s NOLOGIN; SELECT pg_terminate_backend(pid) FROM (%s) w")
            :format(role, wait_backends(env)))
          -- the job ends while the wait cannot connect
          as_role(false)
          env:start()
          env:wait_state(id, "completed", 30)
          assert.equal(0, env:stop())
          env:exec(("ALTER ROLE %s LOGIN"):format(role))
          local out, err, code = read()
          assert.equal(0, code, out .. err)
          assert.equal(id .. " completed 5\n", out)
          -- refused until the timeout: a give-up, exit 7
          local other = env:push("r", "{}")
          as_role(true)
          read = wait_bg(env, tostring(other), "--timeout", "10")
          jr.wait_for(function() return #env:query(wait_backends(env)) >= 2 end, 30,
            "the wait's LISTEN and read")
          env:exec(("ALTER ROLE %s NOLOGIN; SELECT pg_terminate_backend(pid) FROM (%s) w")
            :format(role, wait_backends(env)))
          out, err, code = read()
          assert.equal(7, code, out .. err)
          assert.equal("", out)
          assert.matches("could not be read again", err, 1, true)
          -- said once, with its cause whole
          assert.equal(1, select(2, err:gsub("giving up", "")), err)
          assert.matches("not permitted to log in", err, 1, true)
        end)
      end)
    end
  end)
end

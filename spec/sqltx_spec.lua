-- sqltx_spec.lua - jobrunner.sql: a handler's statements run in the
-- transaction that records its job's success, each job's in a savepoint
-- of its own (docs/handlers.md, "Writes that commit with the job").
local jr = require "jr"
local cjson = require "cjson"
local H = require "jrhttp"

-- The ledger table of env, as handlers name it: in the env's schema on
-- PostgreSQL (the runner's connection keeps the default search_path).
local function ledger(env)
  if env.backend == "postgres" then
    jr.psql("CREATE SCHEMA IF NOT EXISTS " .. env.schema)
    jr.psql("CREATE TABLE " .. env.schema .. ".ledger (job bigint PRIMARY KEY,"
      .. " i bigint, f double precision, s text, b boolean, n text)")
    return env.schema .. ".ledger"
  end
  env:exec("CREATE TABLE ledger (job INTEGER PRIMARY KEY, i INTEGER, f REAL,"
    .. " s TEXT, b INTEGER, n TEXT)")
  return "ledger"
end

local function rows(env, t, where)
  return env:query("SELECT job, i, s FROM " .. t .. (where or "") .. " ORDER BY job")
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " jobrunner.sql:", function()
    local env = jr.test_env(backend)

    it("writes its rows with the job's success, exact integers beyond 2^53", function()
      local t = ledger(env)
      env:script("pay", ([[
        local jobrunner = require "jobrunner"
        return function(job)
          jobrunner.sql("INSERT INTO %s (job, i, f, s, b, n) VALUES ($1, $2, $3, $4, $5, $6)",
            job.id, job.payload.i, 0.5, "é'; --", true, nil)
          jobrunner.sql{ { "UPDATE %s SET s = s || $1 WHERE job = $2", "!", job.id } }
        end]]):format(t, t))
      env:start()
      local id = env:push("pay", '{"i": 9007199254740993}')
      jr.wait_for(function() return env:count() == 0 end)
      local r = env:query("SELECT job, CAST(i AS TEXT) AS i, f, s, b, n FROM " .. t)
      assert.equal(1, #r)
      assert.equal(id, r[1].job)
      assert.equal("9007199254740993", r[1].i)
      assert.equal(0.5, r[1].f)
      assert.equal("é'; --!", r[1].s)
      assert.truthy(r[1].b == true or r[1].b == 1)
      assert.equal(cjson.null, r[1].n)
      assert.equal(0, env:stop())
    end)

    it("fails only the job whose statement fails; none of its statements apply", function()
      local t = ledger(env)
      env:script("pay", ([[
        local jobrunner = require "jobrunner"
        return { max_retries = 0, handle = function(job)
          if not job.payload.only then
            jobrunner.sql("INSERT INTO %s (job, s) VALUES ($1, 'first')", job.id)
          end
          if job.payload.bad or job.payload.only then
            jobrunner.sql("INSERT INTO %s (job, s) VALUES ($1, 'dup')", -1)
          end
        end }]]):format(t, t))
      env:exec("INSERT INTO " .. (backend == "postgres" and t or "ledger") .. " (job, s) VALUES (-1, 'taken')")
      local base = H.start(env, "concurrency = 1")
      local ids = {}
      for i = 1, 6 do
        ids[i] = env:push("pay", i == 3 and '{"bad": true}' or "{}")
      end
      local only = env:push("pay", '{"only": true}')  -- one statement, failing
      jr.wait_for(function() return env:idle() end)
      local got = rows(env, t, " WHERE job <> -1")
      assert.equal(5, #got)
      for _, r in ipairs(got) do assert.is_not.equal(ids[3], r.job) end
      local dead = env:job(ids[3])
      assert.equal("dead", dead.state)
      assert.truthy(dead.last_error:find("jobrunner.sql statement 2 of 'pay' failed", 1, true),
        dead.last_error)
      if backend == "postgres" then
        assert.truthy(dead.last_error:find("SQLSTATE 23505", 1, true), dead.last_error)
      else
        assert.truthy(dead.last_error:find("UNIQUE constraint failed", 1, true), dead.last_error)
      end
      local log = env:query("SELECT attempt_log FROM jobs WHERE id = " .. ids[3])[1].attempt_log
      if type(log) == "string" then log = cjson.decode(log) end
      assert.truthy(log[1].error:find("statement 2 of 'pay'", 1, true))
      local e = env:job(only).last_error
      assert.truthy(e:find("jobrunner.sql statement 1 of 'pay' failed", 1, true), e)
      assert.equal(1, #rows(env, t, " WHERE job = -1"))
      local _, text = H.req(base .. "/metrics", { token = true })
      assert.truthy(text:find("\njobrunner_sql_statements_total 8\n", 1, true), text)
      assert.truthy(text:find("\njobrunner_sql_failures_total 2\n", 1, true), text)
      assert.equal(0, env:stop())
    end)

    it("runs no statement of a job no longer the runner's; the others ending with it apply", function()
      local t = ledger(env)
      -- four jobs held at a gate end together; one's row is taken from
      -- the runner meanwhile: its completion is fenced off, and so are
      -- its statements, where the others' commit
      env:script("gate", ([[
        local jobrunner = require "jobrunner"
        return function(job)
          local dir = os.getenv("PWD")
          local f = assert(io.open(dir .. "/in." .. job.id, "w"))
          f:write("in")
          f:close()
          while not io.open(dir .. "/go") do jobrunner.sleep(0.02) end
          jobrunner.sql("INSERT INTO %s (job, s) VALUES ($1, 'gate')", job.id)
        end]]):format(t))
      env:config("concurrency = 4")
      env:start()
      local ids = {}
      for i = 1, 4 do ids[i] = env:push("gate") end
      for i = 1, 4 do jr.wait_file(env.dir .. "/in." .. ids[i]) end
      env:exec("UPDATE jobs SET locked_by = 'elsewhere' WHERE id = " .. ids[2])
      local go = assert(io.open(env.dir .. "/go", "w"))
      go:close()
      jr.wait_for(function() return #rows(env, t) >= 3 end)
      assert.equal(0, env:stop())   -- every result recorded before it exits
      local got = rows(env, t)
      assert.same({ ids[1], ids[3], ids[4] }, { got[1].job, got[2].job, got[3].job })
      local j = env:job(ids[2])
      assert.equal("running", j.state)
      assert.equal("elsewhere", j.locked_by)
    end)

    it("retries a job whose statement failed, and applies it once it passes", function()
      local t = ledger(env)
      env:script("pay", ([[
        local jobrunner = require "jobrunner"
        return { max_retries = 3, backoff = 0, handle = function(job)
          jobrunner.sql("INSERT INTO %s (job, s) VALUES ($1, $2)", job.id,
            job.attempt == 1 and "no such column" or "ok")
          if job.attempt == 1 then jobrunner.sql("SELECT nope FROM %s") end
        end }]]):format(t, t))
      env:start()
      local id = env:push("pay")
      jr.wait_for(function() return env:count() == 0 end)
      local got = rows(env, t)
      assert.equal(1, #got)
      assert.equal("ok", got[1].s)
      assert.equal(0, env:stop())
    end)

    it("applies nothing after a snooze, a discard or a failure", function()
      local t = ledger(env)
      env:script("pay", ([[
        local jobrunner = require "jobrunner"
        return { max_retries = 0, handle = function(job)
          jobrunner.sql("INSERT INTO %s (job, s) VALUES ($1, $2)", job.id, job.payload.how)
          if job.payload.how == "snooze" then
            local marker = os.getenv("PWD") .. "/snoozed"
            if not io.open(marker) then
              io.open(marker, "w"):close()
              jobrunner.snooze(1)
            end
            return
          end
          if job.payload.how == "discard" then jobrunner.discard("no") end
          if job.payload.how == "fail" then error("boom") end
        end }]]):format(t))
      env:start()
      local s = env:push("pay", '{"how": "snooze"}')
      local d = env:push("pay", '{"how": "discard"}')
      local f = env:push("pay", '{"how": "fail"}')
      jr.wait_for(function()
        local a, b = env:job(d), env:job(f)
        return a and a.state == "dead" and b and b.state == "dead"
      end)
      assert.equal(0, #rows(env, t, " WHERE job IN (" .. d .. ", " .. f .. ")"))
      -- the snoozed job's first attempt wrote nothing; its second, once
      jr.wait_for(function() return env:job(s) == nil end)
      assert.equal(1, #rows(env, t, " WHERE job = " .. s))
      assert.equal(0, env:stop())
    end)

    it("refuses strings with NUL bytes, tables and transaction control, naming the statement", function()
      env:script("bad", [[
        local jobrunner = require "jobrunner"
        return { max_retries = 0, handle = function(job)
          local p = job.payload
          if p.k == "nul" then jobrunner.sql("SELECT $1", "a\0b") end
          if p.k == "table" then jobrunner.sql{ { "SELECT 1" }, { "SELECT $1", {} } } end
          if p.k == "commit" then jobrunner.sql(" /* x */ COMMIT") end
        end }]])
      env:start()
      local a = env:push("bad", '{"k": "nul"}')
      local b = env:push("bad", '{"k": "table"}')
      local c = env:push("bad", '{"k": "commit"}')
      jr.wait_for(function()
        for _, id in ipairs({ a, b, c }) do
          local j = env:job(id)
          if not j or j.state ~= "dead" then return false end
        end
        return true
      end)
      assert.truthy(env:job(a).last_error:find("jobrunner.sql: statement 1: parameter 1 is a string holding a NUL byte", 1, true), env:job(a).last_error)
      assert.truthy(env:job(b).last_error:find("jobrunner.sql: statement 2: parameter 1 is a table", 1, true), env:job(b).last_error)
      assert.truthy(env:job(c).last_error:find("controls the transaction", 1, true), env:job(c).last_error)
      assert.equal(0, env:stop())
    end)

    it("runs the statements of coroutine jobs (inflight)", function()
      local t = ledger(env)
      env:script("pay", ([[
        local jobrunner = require "jobrunner"
        return { inflight = 10, handle = function(job)
          jobrunner.sql("INSERT INTO %s (job, i) VALUES ($1, $2)", job.id, job.payload.i)
          jobrunner.sleep(0.05)
          jobrunner.sql("UPDATE %s SET s = 'done' WHERE job = $1", job.id)
        end }]]):format(t, t))
      env:config("concurrency = 1")
      env:start()
      for i = 1, 30 do env:push("pay", ('{"i": %d}'):format(i)) end
      jr.wait_for(function() return env:count() == 0 end)
      local got = env:query("SELECT count(*) AS n FROM " .. t .. " WHERE s = 'done'")
      assert.equal(30, got[1].n)
      assert.equal(0, env:stop())
    end)

    it("re-runs a job killed between its return and the commit; its rows appear once", function()
      local t = ledger(env)
      -- the first statement holds the commit back: the runner is killed
      -- while the completion runs it, after the handler returned
      local slow = backend == "postgres" and "SELECT pg_sleep(4)" or
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c"
        .. " WHERE x < 40000000) SELECT count(*) FROM c"
      env:script("pay", ([[
        local jobrunner = require "jobrunner"
        return function(job)
          if job.attempt == 1 then jobrunner.sql(%q) end
          jobrunner.sql("INSERT INTO %s (job, s) VALUES ($1, 'once')", job.id)
          local f = assert(io.open(os.getenv("PWD") .. "/ran", "a"))
          f:write(job.attempt, "\n")
          f:close()
        end]]):format(slow, t))
      env:config("lease = 2")
      local p = env:start()
      local id = env:push("pay")
      jr.wait_file(env.dir .. "/ran")
      env:signal("KILL", p)
      jr.wait_for(function() return not env:alive(p) end)
      assert.equal(0, #rows(env, t))
      env:start()
      jr.wait_for(function() return env:job(id) == nil end, 60)
      assert.same({ "1", "2" }, jr.lines(env.dir .. "/ran"))
      assert.equal(1, #rows(env, t))
      assert.equal(0, env:stop())
    end)

    if backend == "postgres" then
      it("confines statements to what handler_role may write", function()
        local t = ledger(env)
        local role = "jr_h_" .. env.schema
        jr.psql("CREATE ROLE " .. role .. " NOLOGIN")
        finally(function()
          jr.psql("DROP OWNED BY " .. role .. "; DROP ROLE " .. role)
        end)
        jr.psql("GRANT USAGE ON SCHEMA " .. env.schema .. " TO " .. role ..
          "; GRANT SELECT, INSERT ON " .. t .. " TO " .. role)
        env:script("pay", ([[
          local jobrunner = require "jobrunner"
          return { max_retries = 0, handle = function(job)
            jobrunner.sql("INSERT INTO %s (job, s) VALUES ($1, current_user)", job.id)
            if job.payload.evil then
              jobrunner.sql("DELETE FROM %s.jobs")
            end
          end }]]):format(t, env.schema))
        env:config(("handler_role = %q"):format(role))
        env:start()
        local ok = env:push("pay")
        local evil = env:push("pay", '{"evil": true}')
        jr.wait_for(function()
          local j = env:job(evil)
          return env:job(ok) == nil and j and j.state == "dead"
        end)
        local got = rows(env, t)
        assert.equal(1, #got)
        assert.equal(role, got[1].s)
        local e = env:job(evil).last_error
        assert.truthy(e:find("statement 2 of 'pay' failed: permission denied", 1, true), e)
        assert.truthy(e:find("SQLSTATE 42501", 1, true), e)
        -- the runner's own writes after the statements ran as itself
        local again = env:push("pay")
        jr.wait_for(function() return env:job(again) == nil end)
        assert.equal(0, env:stop())
      end)
    else
      it("writes to the file named by attach, as app", function()
        local app = env.dir .. "/app.db"
        jr.sh(("sqlite3 %s 'CREATE TABLE ledger (job INTEGER PRIMARY KEY, s TEXT)'"):format(app))
        env:script("pay", [[
          local jobrunner = require "jobrunner"
          return function(job)
            jobrunner.sql("INSERT INTO app.ledger (job, s) VALUES (?1, ?2)", job.id, "x")
          end]])
        env:config(("attach = %q"):format(app))
        env:start()
        local id = env:push("pay")
        jr.wait_for(function() return env:job(id) == nil end)
        assert.equal(tostring(id) .. "|x\n", jr.sh(("sqlite3 -cmd '.timeout 10000' %s 'SELECT * FROM ledger'"):format(app)))
        assert.equal(0, env:stop())
      end)
    end
  end)
end

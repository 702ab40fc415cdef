-- sqlquery_spec.lua - jobrunner.query: a handler reads rows now, on a
-- read-only connection of its worker's own, outside the transaction that
-- records the job (docs/handlers.md, "Reads before writes"), and writes
-- what it decided through jobrunner.sql.
local jr = require "jr"

-- A table named as handlers name it: in the env's schema on PostgreSQL.
local function tbl(env, name, cols_pg, cols_lite)
  if env.backend == "postgres" then
    jr.psql("CREATE SCHEMA IF NOT EXISTS " .. env.schema)
    jr.psql(("CREATE TABLE %s.%s (%s)"):format(env.schema, name, cols_pg))
    return env.schema .. "." .. name
  end
  env:exec(("CREATE TABLE %s (%s)"):format(name, cols_lite))
  return name
end

local function settled(env)
  jr.wait_for(function()
    return env:idle()
  end)
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " jobrunner.query:", function()
    local env = jr.test_env(backend)

    it("reads rows the handler then writes with jobrunner.sql, values exact", function()
      local c = tbl(env, "counter", "name text PRIMARY KEY, n bigint, big bigint, "
        .. "f double precision, note text, gone text",
        "name TEXT PRIMARY KEY, n INTEGER, big INTEGER, f REAL, note TEXT, gone TEXT")
      local seen = tbl(env, "seen", "job bigint PRIMARY KEY, what text",
        "job INTEGER PRIMARY KEY, what TEXT")
      env:exec(("INSERT INTO %s VALUES ('c', 0, 9007199254740993, 0.5, 'é''x', NULL)")
        :format(backend == "postgres" and c or "counter"))
      env:script("count", ([[
        local jobrunner = require "jobrunner"
        return { max_retries = 0, handle = function(job)
          local rows = jobrunner.query("SELECT n, big, f, note, gone FROM %s WHERE name = $1", "c")
          assert(#rows == 1, "rows: " .. #rows)
          local r = rows[1]
          jobrunner.sql("UPDATE %s SET n = $1 WHERE name = $2 AND n = $3", r.n + 1, "c", r.n)
          jobrunner.sql("INSERT INTO %s (job, what) VALUES ($1, $2)", job.id,
            table.concat({ math.type(r.n), math.type(r.big), tostring(r.big),
                           tostring(r.f), r.note, tostring(r.gone) }, " "))
          assert(#jobrunner.query("SELECT n FROM %s WHERE name = $1", "none") == 0)
        end }]]):format(c, c, seen, c))
      env:config("concurrency = 1")
      env:start()
      local ids = {}
      for i = 1, 5 do ids[i] = env:push("count") end
      settled(env)
      local n = env:query("SELECT n FROM " .. c)
      assert.equal(5, n[1].n)
      local got = env:query("SELECT what FROM " .. seen .. " WHERE job = " .. ids[5])
      assert.equal("integer integer 9007199254740993 0.5 é'x nil", got[1].what)
      assert.equal(0, env:stop())
    end)

    it("refuses a write: its connection is read-only", function()
      local t = tbl(env, "t", "x bigint", "x INTEGER")
      env:script("w", ([[
        local jobrunner = require "jobrunner"
        return { max_retries = 0, handle = function(job)
          jobrunner.query("INSERT INTO %s (x) VALUES ($1)", 1)
        end }]]):format(t))
      env:start()
      local id = env:push("w")
      settled(env)
      local j = env:job(id)
      assert.equal("dead", j.state)
      assert.truthy(j.last_error:find("jobrunner.query of 'w' failed: ", 1, true), j.last_error)
      if backend == "postgres" then
        assert.truthy(j.last_error:find("read-only transaction", 1, true), j.last_error)
        assert.truthy(j.last_error:find("SQLSTATE 25006", 1, true), j.last_error)
      else
        assert.truthy(j.last_error:find("readonly database", 1, true), j.last_error)
      end
      assert.equal(0, #env:query("SELECT x FROM " .. t))
      assert.equal(0, env:stop())
    end)

    it("fails the attempt only on bad SQL or too many rows; the worker reads on", function()
      local t = tbl(env, "t", "x bigint", "x INTEGER")
      env:script("q", ([[
        local jobrunner = require "jobrunner"
        return { max_retries = 0, handle = function(job)
          local how = job.payload.how
          if how == "bad" then jobrunner.query("SELECT nope FROM %s") end
          if how == "many" then
            jobrunner.query("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL "
              .. "SELECT x + 1 FROM c WHERE x < 10001) SELECT x FROM c")
          end
          if how == "two" then jobrunner.query("SELECT 1; SELECT 2") end
          if how == "set" then jobrunner.query("SET x = 1") end
          local r = jobrunner.query("SELECT 10000 AS n")
          jobrunner.sql("INSERT INTO %s (x) VALUES ($1)", r[1].n + job.id)
        end }]]):format(t, t))
      env:config("concurrency = 1")
      env:start()
      local bad = env:push("q", '{"how": "bad"}')
      local many = env:push("q", '{"how": "many"}')
      local two = env:push("q", '{"how": "two"}')
      local set = env:push("q", '{"how": "set"}')
      local good = env:push("q", '{"how": "good"}')
      settled(env)
      local e = env:job(bad).last_error
      assert.truthy(e:find("jobrunner.query of 'q' failed: ", 1, true), e)
      if backend == "postgres" then
        assert.truthy(e:find("SQLSTATE 42703", 1, true), e)
      else
        assert.truthy(e:find("no such column: nope", 1, true), e)
      end
      e = env:job(many).last_error
      assert.truthy(e:find("over 10000", 1, true) and e:find("LIMIT", 1, true), e)
      e = env:job(two).last_error
      assert.truthy(e:find("jobrunner.query of 'q' failed: ", 1, true), e)
      e = env:job(set).last_error
      assert.truthy(e:find("jobrunner.query of 'q': ", 1, true), e)
      for _, id in ipairs({ bad, many, two, set }) do
        assert.equal("dead", env:job(id).state)
      end
      local got = env:query("SELECT x FROM " .. t)
      assert.equal(1, #got)
      assert.equal(10000 + good, got[1].x)
      assert.equal(0, env:stop())
    end)

    it("reads in coroutine jobs (inflight), on the worker's one connection", function()
      local t = tbl(env, "t", "x bigint PRIMARY KEY", "x INTEGER PRIMARY KEY")
      env:script("co", ([[
        local jobrunner = require "jobrunner"
        return { inflight = 4, handle = function(job)
          jobrunner.sleep(0.05)
          local r = jobrunner.query("SELECT $1 + 0 AS x", job.id)
          jobrunner.sql("INSERT INTO %s (x) VALUES ($1)", r[1].x)
        end }]]):format(t))
      env:config("concurrency = 1")
      env:start()
      for _ = 1, 12 do env:push("co") end
      settled(env)
      assert.equal(12, #env:query("SELECT x FROM " .. t))
      assert.equal(0, env:stop())
    end)

    if backend == "postgres" then
      it("reads as handler_role: what the role may not read is refused", function()
        local t = tbl(env, "t", "x bigint", "x INTEGER")
        local role = "jr_q_" .. env.schema
        jr.psql("CREATE ROLE " .. role .. " NOLOGIN")
        finally(function()
          jr.psql("DROP OWNED BY " .. role .. "; DROP ROLE " .. role)
        end)
        jr.psql("GRANT USAGE ON SCHEMA " .. env.schema .. " TO " .. role ..
          "; GRANT SELECT, INSERT ON " .. t .. " TO " .. role)
        env:script("r", ([[
          local jobrunner = require "jobrunner"
          return { max_retries = 0, handle = function(job)
            local who = jobrunner.query("SELECT current_user AS u")[1].u
            jobrunner.sql("INSERT INTO %s (x) VALUES ($1)", #who)
            if job.payload.evil then jobrunner.query("SELECT id FROM %s.jobs") end
          end }]]):format(t, env.schema))
        env:config(("handler_role = %q"):format(role))
        env:start()
        local ok = env:push("r")
        local evil = env:push("r", '{"evil": true}')
        jr.wait_for(function()
          local j = env:job(evil)
          return env:job(ok) == nil and j and j.state == "dead"
        end)
        assert.equal(#role, env:query("SELECT x FROM " .. t)[1].x)
        local e = env:job(evil).last_error
        assert.truthy(e:find("jobrunner.query of 'r' failed: permission denied", 1, true), e)
        assert.truthy(e:find("SQLSTATE 42501", 1, true), e)
        assert.equal(0, env:stop())
      end)
    else
      it("reads the file named by attach, as app", function()
        local app = env.dir .. "/app.db"
        jr.sh(("sqlite3 %s \"CREATE TABLE src (v TEXT); INSERT INTO src VALUES ('from app')\"")
          :format(app))
        env:exec("CREATE TABLE dst (v TEXT)")
        env:script("r", [[
          local jobrunner = require "jobrunner"
          return function(job)
            local v = jobrunner.query("SELECT v FROM app.src")[1].v
            jobrunner.sql("INSERT INTO dst (v) VALUES (?1)", v)
          end]])
        env:config(("attach = %q"):format(app))
        env:start()
        local id = env:push("r")
        jr.wait_for(function() return env:job(id) == nil end)
        assert.equal("from app", env:query("SELECT v FROM dst")[1].v)
        assert.equal(0, env:stop())
      end)
    end
  end)
end

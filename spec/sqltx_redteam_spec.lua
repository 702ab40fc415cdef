-- sqltx_redteam_spec.lua - jobrunner.sql under texts a careless or
-- hostile handler sends (docs/handlers.md, "Writes that commit with the
-- job"): what each engine refuses, and that the runner goes on after.
local jr = require "jr"

-- A table t(k) handlers write to, named as they name it.
local function table_k(env)
  if env.backend == "postgres" then
    jr.psql("CREATE SCHEMA IF NOT EXISTS " .. env.schema)
    jr.psql("CREATE TABLE " .. env.schema .. ".t (k text)")
    return env.schema .. ".t"
  end
  env:exec("CREATE TABLE t (k TEXT)")
  return "t"
end

local function keys(env, t)
  local got = {}
  for _, r in ipairs(env:query("SELECT k FROM " .. t .. " ORDER BY k")) do
    got[#got + 1] = r.k
  end
  return got
end

local function ended(env, ids)
  return function()
    for _, id in ipairs(ids) do
      local j = env:job(id)
      if j and j.state ~= "dead" then return false end
    end
    return true
  end
end

-- After one SIGTERM to runner p while job id's statement does not end:
-- the runner exits 0 by itself, its statement interrupted, and the job
-- is queued again with a failed attempt.
local function interrupted(env, p, id)
  local gone = pcall(jr.wait_for, function() return not env:alive(p) end, 60)
  assert(gone, "the runner did not exit within 60 s of SIGTERM; its log:\n" .. env:log(p))
  local status = jr.wait_for(function()
    return (jr.read_file(p.statusfile) or ""):match("%d+")
  end, 5, "status")
  assert.equal(0, tonumber(status))
  assert.truthy(env:log(p):find("its statement is interrupted", 1, true), env:log(p))
  local j = env:job(id)
  assert.equal("queued", j.state)
  assert.truthy(j.last_error:find("jobrunner.sql statement 1 of 'hang' failed", 1, true), j.last_error)
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " jobrunner.sql, red team:", function()
    local env = jr.test_env(backend)

    it("refuses a text of two statements at every attempt; a trailing ; or comment is one", function()
      local t = table_k(env)
      env:script("two", ([[
        local jobrunner = require "jobrunner"
        return { max_retries = 2, backoff = 0, handle = function(job)
          if job.payload.one then
            jobrunner.sql("INSERT INTO %s (k) VALUES ('semi') ; -- done\n/* end */;")
          else
            jobrunner.sql("INSERT INTO %s (k) VALUES ('one'); INSERT INTO %s (k) VALUES ('two')")
          end
        end }]]):format(t, t, t))
      env:config("concurrency = 1")
      env:start()
      local two = env:push("two")
      local one = env:push("two", '{"one": true}')
      jr.wait_for(ended(env, { two, one }), 60)
      -- the retries sent the same text: not its first statement alone
      local j = env:job(two)
      assert.is_not_nil(j, "the job of two statements completed")
      assert.equal("dead", j.state)
      assert.equal(3, j.attempts)
      assert.truthy(j.last_error:find("jobrunner.sql statement 1 of 'two' failed", 1, true), j.last_error)
      if backend == "sqlite" then
        assert.truthy(j.last_error:find("the text holds more than one statement", 1, true), j.last_error)
      else
        assert.truthy(j.last_error:find("multiple commands", 1, true), j.last_error)
      end
      assert.is_nil(env:job(one))
      assert.same({ "semi" }, keys(env, t))
      assert.equal(0, env:stop())
    end)

    it("stops at SIGTERM while a handler's statement does not end: interrupted, a failed attempt", function()
      local slow = backend == "postgres" and "SELECT pg_sleep(100000)" or
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
      env:script("hang", ([[
        local jobrunner = require "jobrunner"
        return function(job)
          jobrunner.sql(%q)
          io.open(os.getenv("PWD") .. "/returned", "w"):close()
        end]]):format(slow))
      env:config("shutdown_timeout = 1")
      local p = env:start()
      local id = env:push("hang")
      if backend == "postgres" then
        finally(function()  -- the server would sleep on after a failure
          jr.psql("SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query = '"
            .. slow .. "'")
        end)
      end
      jr.wait_for(function() return jr.read_file(env.dir .. "/returned") end, 20,
        "the handler's return")
      -- the statement runs: seen by the server, or holding SQLite's write
      -- lock longer than any round of the runner's own
      if backend == "postgres" then
        jr.wait_for(function()
          return jr.psql("SELECT count(*) FROM pg_stat_activity WHERE query = '"
            .. slow .. "' AND state = 'active'"):match("%d+") == "1"
        end, 20, "the statement running")
      else
        local held = 0
        jr.wait_for(function()
          local _, _, code = jr.sh(("sqlite3 -cmd '.timeout 0' %s 'BEGIN IMMEDIATE; ROLLBACK'")
            :format(jr.quote(env:sqlite_path())))
          held = code ~= 0 and held + 1 or 0
          if held < 10 then jr.sleep(0.2) end
          return held >= 10
        end, 30, "the statement holding the write lock")
      end
      env:signal("TERM", p)
      interrupted(env, p, id)
    end)

    if backend == "postgres" then
      it("stops at SIGTERM when the round of a statement that does not end is lost: the last recording interrupts it", function()
        local slow = "SELECT pg_sleep(100001)"
        env:script("hang", ([[
          local jobrunner = require "jobrunner"
          return function(job)
            jobrunner.sql(%q)
          end]]):format(slow))
        env:config("shutdown_timeout = 1")
        local p = env:start()
        local id = env:push("hang")
        finally(function()
          jr.psql("SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query = '"
            .. slow .. "'")
        end)
        jr.wait_for(function()
          return jr.psql("SELECT count(*) FROM pg_stat_activity WHERE query = '"
            .. slow .. "' AND state = 'active'"):match("%d+") == "1"
        end, 20, "the statement running")
        -- the stop's round fails (its connection gone) before its 2 s
        -- are up: its results are recorded again at the end, where the
        -- statement runs again on a new connection
        env:signal("TERM", p)
        jr.psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = '"
          .. slow .. "'")
        interrupted(env, p, id)
      end)

      it("goes on after a statement that changed the session (DEALLOCATE, set_config)", function()
        local t = table_k(env)
        env:script("poison", ([[
          local jobrunner = require "jobrunner"
          return function(job)
            local how = job.payload.how
            jobrunner.sql("INSERT INTO %s (k) VALUES ($1)", how)
            if how == "deallocate" then
              jobrunner.sql("DO $$ BEGIN EXECUTE 'DEALLOCATE ALL'; END $$")
            elseif how == "read_only" then
              jobrunner.sql("SELECT set_config('default_transaction_read_only', 'on', false)")
            elseif how == "role" then
              jobrunner.sql("SELECT set_config('role', 'pg_read_all_data', false)")
            end
          end]]):format(t))
        env:config("concurrency = 1")
        env:start()
        for _, how in ipairs({ "deallocate", "after1", "read_only", "after2", "role", "after3" }) do
          local id = env:push("poison", ('{"how": "%s"}'):format(how))
          jr.wait_for(function() return env:job(id) == nil end, 30,
            "job " .. how .. " completed")
        end
        assert.same({ "after1", "after2", "after3", "deallocate", "read_only", "role" },
          keys(env, t))
        assert.equal(0, env:stop())
      end)
    end
  end)
end

-- control_sql_spec.lua - queues and cancel from plain SQL, as
-- docs/storage.md documents them: on PostgreSQL the functions
-- jobrunner.pause, jobrunner.resume and jobrunner.cancel, inside the
-- caller's transaction (a rollback undoes them); on SQLite updates of the
-- queues table. A runner honours a pause made this way.
local jr = require "jr"

-- Runs statements in one psql session (so BEGIN/ROLLBACK span them) and
-- returns the last one's single value.
local function psql(env, sql)
  local out, err, code = jr.sh(("psql -X -q -A -t -v ON_ERROR_STOP=1 %s -c %s")
    :format(jr.quote(jr.pg_url), jr.quote("SET search_path TO " .. env.schema ..
      "; " .. sql)))
  assert(code == 0, "psql failed: " .. sql .. ": " .. err)
  return (out:gsub("%s+$", ""))
end

local function paused(env, queue)
  local rows = env:query("SELECT paused FROM queues WHERE name = '" .. queue .. "'")
  return rows[1] ~= nil and (rows[1].paused == true or rows[1].paused == 1)
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": control from SQL", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("a queue paused from SQL is not run until resumed", function()
      env:cli("migrate")
      env:script("sq.job", jr.RECORD .. [[
        return function(job) record("ran", job.queue) end
      ]])
      env:push("sq.job", "{}", "--queue", "media")
      if backend == "postgres" then
        psql(env, "SELECT " .. env.schema .. ".pause('media')")
      else
        env:exec("INSERT INTO queues (name, paused, paused_at)" ..
          " VALUES ('media', 1, (julianday('now') - 2440587.5) * 86400.0)" ..
          " ON CONFLICT (name) DO UPDATE SET paused = 1," ..
          " paused_at = excluded.paused_at")
      end
      assert.is_true(paused(env, "media"))
      env:push("sq.job", "{}", "--queue", "mail")
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/ran") >= 1 end, 20,
        "the mail job runs")
      jr.sleep(1)
      assert.are.same({ "mail" }, jr.lines(env.dir .. "/ran"))
      if backend == "postgres" then
        psql(env, "SELECT " .. env.schema .. ".resume('media')")
      else
        env:exec("UPDATE queues SET paused = 0, paused_at = NULL WHERE name = 'media'")
      end
      jr.wait_for(function() return #jr.lines(env.dir .. "/ran") >= 2 end, 20,
        "the media job runs once resumed")
      env:stop()
    end)

    it("plain SQL inserts make their queue known to claims", function()
      env:cli("migrate")
      env:exec("INSERT INTO jobs (name, queue) VALUES ('sq.plain', 'by.sql')")
      assert.are.same({ { name = "by.sql" } },
        env:query("SELECT name FROM queues WHERE name = 'by.sql'"))
      env:exec("UPDATE jobs SET queue = 'moved.sql' WHERE name = 'sq.plain'")
      assert.are.same({ { name = "moved.sql" } },
        env:query("SELECT name FROM queues WHERE name = 'moved.sql'"))
    end)

    if backend == "postgres" then
      it("jobrunner.pause, resume and cancel act in the caller's transaction", function()
        env:cli("migrate")
        local s = env.schema
        local id = env:push("sq.cancel", "{}")
        -- rolled back: no effect
        psql(env, ("BEGIN; SELECT %s.pause('media'); SELECT %s.cancel(%d); ROLLBACK")
          :format(s, s, id))
        assert.is_false(paused(env, "media"))
        assert.are.equal("queued", env:job(id).state)
        -- committed
        assert.are.equal("cancelled", psql(env, ("SELECT %s.cancel(%d)"):format(s, id)))
        assert.are.equal("cancelled", env:job(id).state)
        assert.are.equal("already finished", psql(env, ("SELECT %s.cancel(%d)"):format(s, id)))
        assert.are.equal("not found", psql(env, ("SELECT %s.cancel(%d)"):format(s, id + 1000)))
        psql(env, ("SELECT %s.pause('media')"):format(s))
        assert.is_true(paused(env, "media"))
        psql(env, ("SELECT %s.resume('media')"):format(s))
        assert.is_false(paused(env, "media"))
        -- a bad queue name is refused by the table
        local _, err, code = jr.sh(("psql -X -q -v ON_ERROR_STOP=1 %s -c %s"):format(
          jr.quote(jr.pg_url), jr.quote(("SELECT %s.pause('bad/name')"):format(s))))
        assert.are_not.equal(0, code)
        assert.matches("queues_name_check", err)
      end)
    end
  end)
end

-- sched_recovery_spec.lua - schedules through trouble: a fire that a
-- failed cycle did not record is retried (catch_up = "none" loses none
-- to a passing error); a runner that was stalled applies catch_up to the
-- instants it missed; on PostgreSQL, actions answered over HTTP and fires
-- commit with synchronous_commit = on, and after a reconnect the
-- schedules read their last fires again.
local jr = require "jr"
local H = require "jrhttp"

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- The instants (whole epoch seconds, sorted) of the jobs named name.
local function instants(env, name)
  local t = {}
  for _, j in ipairs(env:jobs(("name = '%s'"):format(name))) do
    t[#t + 1] = math.floor(j.run_at + 0.5)
  end
  table.sort(t)
  return t
end

local function within(t, from, to)
  local n = 0
  for _, at in ipairs(t) do
    if at >= from and at <= to then n = n + 1 end
  end
  return n
end

-- Makes every write of the runner fail for secs seconds as the database's
-- trouble (not the row's): SQLite, a write lock held past busy_timeout;
-- PostgreSQL, a trigger raising lock_not_available, as a lock timeout.
local function jam(env, secs)
  if env.backend == "sqlite" then
    os.execute(("(echo 'BEGIN IMMEDIATE;'; sleep %d; echo 'COMMIT;') | " ..
      "sqlite3 %s >/dev/null 2>&1"):format(secs, q(env:sqlite_path())))
  else
    env:exec("INSERT INTO jam VALUES (true)")
    jr.sleep(secs)
    env:exec("DELETE FROM jam")
  end
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": schedules in trouble", function()
    local env = jr.test_env(backend)

    it("retry a fire a failed cycle did not record, catch_up = none too", function()
      env:script("other", "return function() end")
      env:config('busy_timeout = 1, poll_interval = 0.2, schedules = { ' ..
        '{ name = "tick", every = "1s", job = "waits", catch_up = "none" } }')
      local p = env:start()
      jr.wait_for(function() return #instants(env, "waits") >= 2 end, 20,
        "first fires")
      if backend == "postgres" then
        env:exec(([[CREATE TABLE jam (on_ boolean);
          CREATE FUNCTION jam_fire() RETURNS trigger LANGUAGE plpgsql AS $$
          BEGIN
            IF EXISTS (SELECT 1 FROM SCHEMA.jam) THEN
              RAISE EXCEPTION 'jammed' USING ERRCODE = '55P03';
            END IF;
            RETURN NEW;
          END $$;
          CREATE TRIGGER jam_fire BEFORE INSERT ON schedule_fires
            FOR EACH ROW EXECUTE FUNCTION jam_fire();]]):gsub("SCHEMA", env.schema))
      end
      local t0 = jr.now()
      jam(env, 10)
      local t1 = jr.now()
      jr.wait_for(function()
        return within(instants(env, "waits"), t1 + 2, t1 + 30) > 0
      end, 30, "fires after the jam")
      env:stop("TERM", p)
      -- every instant once, none skipped across the jam
      local t = instants(env, "waits")
      for i = 2, #t do
        assert(t[i] == t[i - 1] + 1, ("%d then %d: %s"):format(t[i - 1], t[i],
          table.concat(t, " ")))
      end
      assert.is_true(within(t, t0 + 1, t1 - 1) >= 2)
      assert.matches("the fires not recorded are retried", env:log(p))
    end)

    it("apply catch_up to the instants missed while the runner was stopped", function()
      env:script("other", "return function() end")
      env:config('poll_interval = 0.2, schedules = { ' ..
        '{ name = "n", every = "1s", job = "none", catch_up = "none" },' ..
        '{ name = "l", every = "1s", job = "last" },' ..
        '{ name = "a", every = "1s", job = "all", catch_up = "all" } }')
      local p = env:start()
      jr.wait_for(function() return #instants(env, "none") >= 2 end, 20,
        "first fires")
      env:signal("STOP", p)
      local t0 = jr.now()
      jr.sleep(7)
      local t1 = jr.now()
      env:signal("CONT", p)
      jr.wait_for(function()
        return within(instants(env, "none"), t1 + 1, t1 + 30) >= 2 and
               within(instants(env, "last"), t1 + 1, t1 + 30) >= 2
      end, 30, "fires after the stop")
      env:stop("TERM", p)
      -- the instants while stopped: none runs none of them, last only the
      -- most recent (at the end of the stop, if any), all every one
      local from, to = math.ceil(t0) + 1, math.floor(t1) - 2
      assert.are.equal(0, within(instants(env, "none"), from, to))
      assert.are.equal(0, within(instants(env, "last"), from, to))
      assert.are.equal(to - from + 1, within(instants(env, "all"), from, to))
      assert.matches("schedule 'n': %d+ fires missed while the runner was behind, 0 to run",
        env:log(p))
      assert.matches("schedule 'l': %d+ fires missed while the runner was behind, 1 to run",
        env:log(p))
    end)
  end)
end

if jr.pg_url then
  describe("postgres: schedules and actions, durable", function()
    local env = jr.test_env("postgres")

    -- A table of (what, synchronous_commit) filled by triggers on the
    -- rows that the runner's own connection changes.
    local function watch()
      env:exec(([[CREATE TABLE seen (what text, sc text);
        CREATE FUNCTION seen_job() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          INSERT INTO SCHEMA.seen VALUES (TG_OP || ' ' ||
            CASE WHEN TG_OP = 'DELETE' THEN OLD.state::text
                 ELSE OLD.state::text || '>' || NEW.state::text END,
            current_setting('synchronous_commit'));
          RETURN NULL;
        END $$;
        CREATE TRIGGER seen_job AFTER UPDATE OR DELETE ON jobs
          FOR EACH ROW EXECUTE FUNCTION seen_job();
        CREATE FUNCTION seen_other() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          INSERT INTO SCHEMA.seen VALUES (TG_TABLE_NAME || ' ' || TG_OP,
            current_setting('synchronous_commit'));
          RETURN NULL;
        END $$;
        CREATE TRIGGER seen_queue AFTER INSERT OR UPDATE ON queues
          FOR EACH ROW EXECUTE FUNCTION seen_other();
        CREATE TRIGGER seen_fire AFTER INSERT ON schedule_fires
          FOR EACH ROW EXECUTE FUNCTION seen_other();]]):gsub("SCHEMA", env.schema))
    end

    local function setting(what)
      local r = env:query(("SELECT sc FROM seen WHERE what LIKE '%s'"):format(what))
      assert.is_true(#r > 0, "no row for " .. what)
      local out = {}
      for _, row in ipairs(r) do out[row.sc] = true end
      return out
    end

    it("commit HTTP actions and fires with synchronous_commit on, claims off", function()
      env:script("bad", "return function() error('boom') end")
      env:script("ok", "return function() end")
      local base = H.start(env, 'defaults = { max_retries = 0 }, ' ..
        'poll_interval = 0.2, schedules = { ' ..
        '{ name = "s", every = "1s", job = "ok" } }')
      watch()
      jr.wait_for(function()
        return #env:query("SELECT 1 FROM seen WHERE what = 'schedule_fires INSERT'") > 0
      end, 20, "a fire")
      local bad = env:push("bad")
      env:wait_state(bad, "dead")
      assert.equal(1, H.json(base .. "/api/dead/retry", 200,
        { body = '{"ids":[' .. bad .. ']}' }).retried)
      env:wait_state(bad, "dead")
      assert.equal(1, H.json(base .. "/api/dead/purge", 200,
        { body = '{"ids":[' .. bad .. ']}' }).purged)
      assert.is_true(H.json(base .. "/api/queues/mail/pause", 200,
        { method = "POST" }).paused)
      local later = env:push("ok", "{}", "--queue", "mail")
      assert.equal("cancelled", H.json(base .. "/api/cancel", 200,
        { body = '{"ids":[' .. later .. ']}' }).jobs[1].outcome)
      assert.is_false(H.json(base .. "/api/queues/mail/resume", 200,
        { method = "POST" }).paused)
      -- what someone was told succeeded: durable
      assert.same({ on = true }, setting("schedule_fires INSERT"))
      assert.same({ on = true }, setting("UPDATE dead>queued"))
      assert.same({ on = true }, setting("DELETE dead"))
      assert.same({ on = true }, setting("queues %"))
      assert.same({ on = true }, setting("UPDATE queued>cancelled"))
      -- claims and results: asynchronous
      assert.same({ off = true }, setting("UPDATE queued>running"))
      assert.same({ off = true }, setting("UPDATE running>dead"))
    end)

    it("read their last fires again after a reconnect", function()
      local app = "jrsched" .. math.random(1, 1e9)
      env.url = jr.pg_url .. "&application_name=" .. app
      env:script("other", "return function() end")
      env:config('poll_interval = 0.2, schedules = { ' ..
        '{ name = "y", cron = "0 0 1 1 *", job = "yearly" } }')
      local p = env:start()
      -- a fire recorded two years ago: the missed one of this year runs
      env:stop("TERM", p)
      env:exec("INSERT INTO schedule_fires (schedule, fire_at) VALUES " ..
        "('y', now() - interval '2 years')")
      p = env:start()
      jr.wait_for(function() return #env:jobs("name = 'yearly'") == 1 end, 20,
        "the catch-up fire")
      -- the server loses it (a crash, a failover) and the runner's
      -- connections drop: after reconnecting it reads the last fires again
      env:exec("DELETE FROM jobs; DELETE FROM schedule_fires; " ..
        "INSERT INTO schedule_fires (schedule, fire_at) VALUES " ..
        "('y', now() - interval '2 years')")
      env:exec(("SELECT pg_terminate_backend(pid) FROM pg_stat_activity " ..
        "WHERE application_name = '%s'"):format(app))
      jr.wait_for(function() return #env:jobs("name = 'yearly'") == 1 end, 30,
        "the fire again after the reconnect")
      env:stop("TERM", p)
      assert.matches("read again after a reconnect", env:log(p))
    end)
  end)
end

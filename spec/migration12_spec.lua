-- migration12_spec.lua - migration 12 adds the attempt history (a job's
-- attempt_log and the job_attempts view) and the schedule controls (the
-- schedules table; PostgreSQL's pause_schedule, resume_schedule and
-- fire_schedule): a database of the previous schema with jobs in every
-- state is brought forward by `jobrunner migrate` with every job intact
-- and no history made up; then failures are recorded, a lost lease
-- included, and a schedule pauses. The old database is made from the
-- first blocks of backends/*/schema.sql with the sqlite3 or psql client.
local jr = require "jr"
local cjson = require "cjson"

local PREVIOUS = 11             -- the schema before this migration

local function old_jobs(env)
  local past, later = jr.past_later(env)
  env:exec(([[
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                      last_error, locked_by, locked_until, finished_at)
    VALUES ('m12.ok', '{"n": 1}', 'default', 'queued', %s, 0, NULL, NULL,
            NULL, NULL),
           ('m12.ok', '{"n": 2}', 'mail', 'queued', %s, 0, NULL, NULL,
            NULL, NULL),
           ('m12.ok', '{"n": 3}', 'default', 'running', %s, 1, NULL,
            'lost-runner:1:ab', %s, NULL),
           ('m12.ok', '{"n": 4}', 'default', 'dead', %s, 4, 'gave up', NULL,
            NULL, %s),
           ('m12.ok', '{"n": 5}', 'default', 'cancelled', %s, 0, 'cancelled',
            NULL, NULL, %s),
           ('m12.ok', '{"n": 6}', 'default', 'completed', %s, 1, NULL, NULL,
            NULL, %s),
           ('m12.fail', '{"n": 7}', 'default', 'queued', %s, 0, NULL, NULL,
            NULL, NULL)
  ]]):format(past, later, past, past, past, past, past, past, past, past,
             past))
  env:exec("INSERT INTO schedule_fires (schedule, fire_at, job_id) VALUES" ..
    " ('nightly', " .. past .. ", 6)")
end

local function snapshot(env)
  local t = {}
  for _, r in ipairs(env:jobs()) do
    t[r.id] = { name = r.name, payload = cjson.decode(r.payload),
                queue = r.queue, state = r.state, attempts = r.attempts,
                last_error = r.last_error, locked_by = r.locked_by }
  end
  return t
end

local function show_json(env, id)
  local out, err, code = env:cli("show", tostring(id), "--json")
  assert.equal(0, code, err)
  return cjson.decode(out)
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": migration 12 (attempt history, schedule controls)", function()
    local env = jr.test_env(backend)

    it("upgrades a database of the previous schema with its jobs intact", function()
      jr.make_schema(env, PREVIOUS)
      old_jobs(env)
      local before = snapshot(env)
      local out, err, code = env:cli("migrate")
      assert.equal(0, code, out .. err)
      assert.same(before, snapshot(env))
      assert.equal(0, #env:query("SELECT * FROM job_attempts"))
      assert.equal(0, #env:query("SELECT id FROM jobs WHERE attempt_log IS NOT NULL"))
      assert.equal(0, #env:query("SELECT * FROM schedules"))
      -- migrate again: nothing to do, nothing changed
      out, err, code = env:cli("migrate")
      assert.equal(0, code, out .. err)
      assert.same(before, snapshot(env))
      -- the upgraded database records attempts and takes the controls
      env:script("m12.ok", "return { max_retries = 3, handle = function() end }")
      env:script("m12.fail", 'return function() error("no luck", 0) end')
      env:config('lease = 1, retention = { completed = "1h", cancelled = "1h" },' ..
        ' defaults = { max_retries = 0 }, schedules = {' ..
        ' { name = "nightly", cron = "0 3 * * *", job = "m12.ok" } }')
      out, err, code = env:cli("schedule", "pause", "nightly")
      assert.equal(0, code, out .. err)
      env:start()
      env:wait_state(7, "dead", 20)
      jr.wait_for(function() return show_json(env, 3).state == "completed" end,
        20, "the lost runner's job rescued and run")
      local dead = show_json(env, 7)
      assert.equal(1, #dead.attempts)
      assert.equal("no luck", dead.attempts[1].error:match("^[^\n]*"))
      local rescued = show_json(env, 3).attempts
      assert.equal(1, #rescued)
      assert.equal("lost-runner:1:ab", rescued[1].runner)
      assert.equal("lease expired: runner lost", rescued[1].error)
      -- the old dead job keeps its last error and has no history
      local old = show_json(env, 4)
      assert.equal("gave up", old.last_error)
      assert.same({}, old.attempts)
      local s = cjson.decode((env:cli("schedules", "--json"))).schedules[1]
      assert.is_true(s.paused)
      assert.equal(6, s.last_fire.job_id)
      env:stop()
    end)
  end)
end
